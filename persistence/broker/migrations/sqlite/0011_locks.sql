-- Fenced advisory locks: per mesh and repository id ('' for none), a key
-- held by one connection's key (a session its session key) until
-- expires_at. fence is the token of the latest grant: it grows by one with
-- every grant to a new holder and never goes back, so a row is kept after
-- its lock is released or expires (holder NULL) — deleting it would let a
-- later grant reuse a token a stale holder still has. Keep in step with
-- ../postgres/0011_locks.sql.
CREATE TABLE mesh_lock (
  mesh_id     TEXT    NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  repo        TEXT    NOT NULL CHECK (length(repo) <= 256),
  key         TEXT    NOT NULL CHECK (length(key) BETWEEN 1 AND 512),
  fence       INTEGER NOT NULL CHECK (fence >= 1),
  holder      TEXT,                       -- pubkey; NULL: free
  holder_name TEXT    NOT NULL DEFAULT '',
  member_id   TEXT,
  acquired_at INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  PRIMARY KEY (mesh_id, repo, key)
) STRICT, WITHOUT ROWID;

-- The sweep's and the list's: held locks by expiry.
CREATE INDEX mesh_lock_held ON mesh_lock (expires_at) WHERE holder IS NOT NULL;
