-- Nodes (each daemon's member connection to a mesh). Keep in step with
-- ../sqlite/0012_nodes.sql, which says what the table holds.
CREATE TABLE node (
  mesh_id         TEXT        NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  member_id       TEXT        NOT NULL REFERENCES member(id) ON DELETE CASCADE,
  host            TEXT        NOT NULL DEFAULT '',
  version         TEXT        NOT NULL DEFAULT '',
  replica         TEXT        NOT NULL,
  conn_id         TEXT        NOT NULL,
  connected_at    TIMESTAMPTZ NOT NULL,
  last_seen_at    TIMESTAMPTZ NOT NULL,
  disconnected_at TIMESTAMPTZ,
  PRIMARY KEY (mesh_id, member_id)
);
