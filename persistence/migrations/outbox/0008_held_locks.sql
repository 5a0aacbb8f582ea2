-- The locks a session's broker connection renews (actors/locks.go): one
-- row per route (the session's "mesh/session" or a membership's slug),
-- repository id and key, with the fence token it holds the lock under and
-- the TTL each renewal asks for. A daemon that restarts renews them when
-- the route's connection is back; a row is deleted when the lock is
-- released, lost or abandoned (its session ended while the broker was out
-- of reach). Every lock transition the daemon sees — these and a
-- member's, which it does not keep — is an audit entry of kind
-- lock.acquired, lock.released, lock.lost or lock.abandoned, written by
-- the statement that records it (persistence.RecordLock) through
-- audit_append.
CREATE TABLE held_lock (
  route       TEXT    NOT NULL,
  repo        TEXT    NOT NULL,
  key         TEXT    NOT NULL,
  mesh        TEXT    NOT NULL,
  holder      TEXT    NOT NULL,   -- the key the lock is held as (pubkey)
  fence       INTEGER NOT NULL,
  ttl_ms      INTEGER NOT NULL,
  acquired_at INTEGER NOT NULL,   -- Unix ms, the daemon's clock
  PRIMARY KEY (route, repo, key)
) STRICT, WITHOUT ROWID;
