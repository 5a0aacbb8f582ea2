-- File reservations. Keep in step with ../sqlite/0015_reservations.sql,
-- which says what the tables hold.
CREATE TABLE reservation_scope (
  mesh_id TEXT   NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  repo    TEXT   NOT NULL CHECK (length(repo) BETWEEN 1 AND 256),
  fence   BIGINT NOT NULL CHECK (fence >= 0),
  PRIMARY KEY (mesh_id, repo)
);

CREATE TABLE reservation (
  mesh_id     TEXT        NOT NULL,
  repo        TEXT        NOT NULL,
  holder      TEXT        NOT NULL,
  pattern     TEXT        NOT NULL CHECK (length(pattern) BETWEEN 1 AND 256),
  exclusive   BOOLEAN     NOT NULL,
  fence       BIGINT      NOT NULL CHECK (fence >= 1),
  holder_name TEXT        NOT NULL DEFAULT '',
  member_id   TEXT        NOT NULL,
  acquired_at TIMESTAMPTZ NOT NULL,
  renewed_at  TIMESTAMPTZ NOT NULL,
  expires_at  TIMESTAMPTZ NOT NULL,
  released_by TEXT,
  PRIMARY KEY (mesh_id, repo, holder, pattern),
  FOREIGN KEY (mesh_id, repo) REFERENCES reservation_scope (mesh_id, repo) ON DELETE CASCADE
);

CREATE INDEX reservation_expiry ON reservation (expires_at);
