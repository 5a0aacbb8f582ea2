-- Skills: named instructions a member publishes to its mesh and any agent of
-- the mesh fetches (wire protocol §2.2 list_skills / get_skill, and our
-- publish_skill / remove_skill). A name is unique per mesh; publishing it
-- again replaces the skill and bumps its version. The publisher is kept as
-- it was at publish time (key and display name), not as a reference: a
-- member revoked later still shows as who published it. tags is a JSON
-- array of strings.
-- Keep in step with ../postgres/0010_skills.sql.
CREATE TABLE skill (
  mesh_id          TEXT    NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  name             TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
  description      TEXT    NOT NULL DEFAULT '',
  content          TEXT    NOT NULL,
  tags             TEXT    NOT NULL DEFAULT '[]',
  version          INTEGER NOT NULL CHECK (version >= 1),
  published_by     TEXT    NOT NULL,            -- the publisher's pubkey
  published_name   TEXT    NOT NULL DEFAULT '', -- its display name then
  published_at     INTEGER NOT NULL,
  PRIMARY KEY (mesh_id, name)
) STRICT, WITHOUT ROWID;
