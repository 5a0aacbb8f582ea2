-- Agent sessions (session_hello connections) as every replica of a
-- PostgreSQL database sees them: one row per (mesh, session key), written
-- by the connection that holds it — at its hello (the member whose
-- attestation the key holds, what the hello said, the replica and
-- connection id), at each heartbeat (the pong answering the broker's ping)
-- and at its close. A hub knows only the sessions connected to its own
-- replica; the accept path reads this table for a DM to a session key it
-- does not know, and a peer list names the sessions of other replicas from
-- it.
--
-- expires_at is until when the key counts as a recipient: its last
-- heartbeat plus the broker's stale threshold while it is connected (a
-- replica that died writes no close: its sessions stop counting that much
-- after their last heartbeat), its close plus the presence grace once
-- closed, as a hub keeps a dropped presence. A member revoked makes its
-- sessions count for nothing (the accept joins member). replica and
-- conn_id name the connection that holds the row: a heartbeat or close of
-- an older connection of the key (a session that reconnected, perhaps to
-- another replica, before its old link was seen to drop) changes nothing.
-- The sweep deletes rows that stopped counting. groups is the hello's
-- groups as a JSON array. Keep in step with ../postgres/0016_sessions.sql.
CREATE TABLE mesh_session (
  mesh_id         TEXT    NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  session_pubkey  TEXT    NOT NULL CHECK (length(session_pubkey) = 64 AND session_pubkey NOT GLOB '*[^0-9a-f]*'),
  member_pubkey   TEXT    NOT NULL,
  replica         TEXT    NOT NULL,
  conn_id         TEXT    NOT NULL,
  display_name    TEXT    NOT NULL DEFAULT '',
  session_id      TEXT    NOT NULL DEFAULT '',
  hostname        TEXT    NOT NULL DEFAULT '',
  cwd             TEXT    NOT NULL DEFAULT '',
  peer_type       TEXT    NOT NULL DEFAULT '',
  channel         TEXT    NOT NULL DEFAULT '',
  groups          TEXT    NOT NULL DEFAULT '[]',
  connected_at    INTEGER NOT NULL,
  expires_at      INTEGER NOT NULL,
  disconnected_at INTEGER,
  PRIMARY KEY (mesh_id, session_pubkey)
) STRICT, WITHOUT ROWID;

CREATE INDEX mesh_session_expiry ON mesh_session (expires_at);
