-- Shared state (wire protocol §2.2: set_state, get_state, list_state):
-- per mesh, a key holding one JSON value (compact text, at most 64 KiB,
-- checked by the store), with a version that starts at 1 and grows by one
-- with every set (a set with if_version is a compare-and-set on it), and
-- who set it last: the key stamped on the setting connection's sends and
-- the name it went by. Keep in step with ../postgres/0008_state.sql.
CREATE TABLE state (
  mesh_id         TEXT    NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  key             TEXT    NOT NULL CHECK (length(key) BETWEEN 1 AND 256),
  value           TEXT    NOT NULL CHECK (json_valid(value)),
  version         INTEGER NOT NULL CHECK (version >= 1),
  updated_by      TEXT    NOT NULL,        -- pubkey
  updated_by_name TEXT    NOT NULL DEFAULT '',
  updated_at      INTEGER NOT NULL,
  PRIMARY KEY (mesh_id, key)
) STRICT, WITHOUT ROWID;
