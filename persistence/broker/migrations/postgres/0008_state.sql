-- Shared state (wire protocol §2.2). Keep in step with
-- ../sqlite/0008_state.sql, which says what the table holds.
CREATE TABLE state (
  mesh_id         TEXT        NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  key             TEXT        NOT NULL CHECK (length(key) BETWEEN 1 AND 256),
  value           TEXT        NOT NULL,
  version         BIGINT      NOT NULL CHECK (version >= 1),
  updated_by      TEXT        NOT NULL,    -- pubkey
  updated_by_name TEXT        NOT NULL DEFAULT '',
  updated_at      TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (mesh_id, key)
);
