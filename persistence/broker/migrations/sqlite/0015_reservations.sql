-- File reservations: gitignore-style path patterns (messages/pathglob)
-- held in a repository (its id: "git:" and its root commit) of a mesh,
-- exclusive or shared, by a connection's key (a session its session key).
--
-- reservation_scope has one row per (mesh, repository): fence is the
-- token of its latest grant, one more with every grant, never going back
-- (the row outlives the reservations). A grant's transaction first takes
-- this row (an upsert: on PostgreSQL its row lock), so that grants in one
-- repository are serialised across replicas; it then reads the active
-- reservations, decides overlap in Go and inserts, or rolls back.
--
-- reservation has one row per holder and pattern, with the fence token of
-- the grant that gave it (a holder that reserves the pattern again moves
-- it to its new grant). renewed_at is the holder's last renewal: a holder
-- unheard for longer than the broker's threshold is gone, and another may
-- force its reservations released — which sets released_by (the name of
-- who forced it) and expires_at to then, so that the old holder's next
-- renewal is told by whom. A plain release deletes the row; the sweep
-- deletes rows an hour after they ran out. Keep in step with
-- ../postgres/0015_reservations.sql.
CREATE TABLE reservation_scope (
  mesh_id TEXT    NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  repo    TEXT    NOT NULL CHECK (length(repo) BETWEEN 1 AND 256),
  fence   INTEGER NOT NULL CHECK (fence >= 0),
  PRIMARY KEY (mesh_id, repo)
) STRICT, WITHOUT ROWID;

CREATE TABLE reservation (
  mesh_id     TEXT    NOT NULL,
  repo        TEXT    NOT NULL,
  holder      TEXT    NOT NULL,   -- pubkey
  pattern     TEXT    NOT NULL CHECK (length(pattern) BETWEEN 1 AND 256),
  exclusive   INTEGER NOT NULL CHECK (exclusive IN (0, 1)),
  fence       INTEGER NOT NULL CHECK (fence >= 1),
  holder_name TEXT    NOT NULL DEFAULT '',
  member_id   TEXT    NOT NULL,
  acquired_at INTEGER NOT NULL,
  renewed_at  INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  released_by TEXT,               -- who forced it released; NULL while it stands
  PRIMARY KEY (mesh_id, repo, holder, pattern),
  FOREIGN KEY (mesh_id, repo) REFERENCES reservation_scope (mesh_id, repo) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

-- The sweep's.
CREATE INDEX reservation_expiry ON reservation (expires_at);
