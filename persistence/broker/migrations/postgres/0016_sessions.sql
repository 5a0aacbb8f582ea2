-- Agent sessions as every replica sees them. Keep in step with
-- ../sqlite/0016_sessions.sql, which says what the table holds.
CREATE TABLE mesh_session (
  mesh_id         TEXT        NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  session_pubkey  TEXT        NOT NULL CHECK (session_pubkey ~ '^[0-9a-f]{64}$'),
  member_pubkey   TEXT        NOT NULL,
  replica         TEXT        NOT NULL,
  conn_id         TEXT        NOT NULL,
  display_name    TEXT        NOT NULL DEFAULT '',
  session_id      TEXT        NOT NULL DEFAULT '',
  hostname        TEXT        NOT NULL DEFAULT '',
  cwd             TEXT        NOT NULL DEFAULT '',
  peer_type       TEXT        NOT NULL DEFAULT '',
  channel         TEXT        NOT NULL DEFAULT '',
  groups          TEXT        NOT NULL DEFAULT '[]',
  connected_at    TIMESTAMPTZ NOT NULL,
  expires_at      TIMESTAMPTZ NOT NULL,
  disconnected_at TIMESTAMPTZ,
  PRIMARY KEY (mesh_id, session_pubkey)
);

CREATE INDEX mesh_session_expiry ON mesh_session (expires_at);
