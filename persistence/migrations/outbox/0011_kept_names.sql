-- The names a route's broker link gave last (actors/brokerconn_names.go),
-- so that a send to a display name or a `#name` resolves while the broker
-- is away, across reconnects and restarts: one row per route (a
-- membership's slug, or a session's "mesh/session") and kind — 'peers',
-- the last peer list's display names and keys, or 'topics', the topics'
-- names and ids — with the names as a JSON array (persistence.KeepNames).
-- A row is replaced when a list changes it, and deleted when the session
-- whose route it is ends.
CREATE TABLE kept_names (
  route   TEXT    NOT NULL,
  kind    TEXT    NOT NULL CHECK (kind = 'peers' OR kind = 'topics'),
  names   TEXT    NOT NULL,   -- JSON array
  kept_at INTEGER NOT NULL,   -- Unix ms, the daemon's clock
  PRIMARY KEY (route, kind)
) STRICT, WITHOUT ROWID;
