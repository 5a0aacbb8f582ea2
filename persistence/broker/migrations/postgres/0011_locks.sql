-- Fenced advisory locks. Keep in step with ../sqlite/0011_locks.sql, which
-- says what the table holds.
CREATE TABLE mesh_lock (
  mesh_id     TEXT        NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  repo        TEXT        NOT NULL CHECK (length(repo) <= 256),
  key         TEXT        NOT NULL CHECK (length(key) BETWEEN 1 AND 512),
  fence       BIGINT      NOT NULL CHECK (fence >= 1),
  holder      TEXT,                       -- pubkey; NULL: free
  holder_name TEXT        NOT NULL DEFAULT '',
  member_id   TEXT,
  acquired_at TIMESTAMPTZ NOT NULL,
  expires_at  TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (mesh_id, repo, key)
);

CREATE INDEX mesh_lock_held ON mesh_lock (expires_at) WHERE holder IS NOT NULL;
