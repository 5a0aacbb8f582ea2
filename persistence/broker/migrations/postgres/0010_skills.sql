-- Skills. Keep in step with ../sqlite/0010_skills.sql, which says what the
-- table holds.
CREATE TABLE skill (
  mesh_id          TEXT        NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  name             TEXT        NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
  description      TEXT        NOT NULL DEFAULT '',
  content          TEXT        NOT NULL,
  tags             TEXT        NOT NULL DEFAULT '[]',
  version          INTEGER     NOT NULL CHECK (version >= 1),
  published_by     TEXT        NOT NULL,            -- the publisher's pubkey
  published_name   TEXT        NOT NULL DEFAULT '', -- its display name then
  published_at     TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (mesh_id, name)
);
