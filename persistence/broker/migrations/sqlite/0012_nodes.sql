-- Nodes: each daemon's member connection to a mesh (a hello without
-- sessionPubkey), one row per member of the mesh — one daemon per member
-- key. The connection writes it: connected_at (and the rest) at its hello,
-- last_seen_at at its heartbeats (the pong answering the broker's ping, at
-- most one write per ping interval), disconnected_at when the broker sees
-- it close. replica and conn_id name the connection that holds the row: a
-- heartbeat or close of an older connection of the same key (a daemon
-- that reconnected before its old link was seen to drop) changes nothing.
-- The state (online, stale, offline) is computed when the nodes are
-- listed, against the broker's stale threshold, so that a node whose
-- replica died (no close was written) turns stale. host and version are
-- what the hello said ('' when it said nothing, as upstream's daemon says
-- no version). Keep in step with ../postgres/0012_nodes.sql.
CREATE TABLE node (
  mesh_id         TEXT    NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  member_id       TEXT    NOT NULL REFERENCES member(id) ON DELETE CASCADE,
  host            TEXT    NOT NULL DEFAULT '',
  version         TEXT    NOT NULL DEFAULT '',
  replica         TEXT    NOT NULL,
  conn_id         TEXT    NOT NULL,
  connected_at    INTEGER NOT NULL,
  last_seen_at    INTEGER NOT NULL,
  disconnected_at INTEGER,
  PRIMARY KEY (mesh_id, member_id)
) STRICT, WITHOUT ROWID;
