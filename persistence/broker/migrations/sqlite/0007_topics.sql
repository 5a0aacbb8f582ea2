-- Topics (wire protocol §2.7): named conversation scopes of a mesh. A topic
-- has an upstream-style id (32 random [0-9A-Za-z]), a name unique in its
-- mesh, a description and a visibility (recorded and listed, not enforced,
-- as upstream). Members join by member id with a role. A send to `#<id>`
-- is an ordinary message with target_spec '#<id>': the topic's history is
-- those messages (message_topic_idx), kept as long as messages are.
-- Keep in step with ../postgres/0007_topics.sql.
CREATE TABLE topic (
  id          TEXT    PRIMARY KEY CHECK (length(id) >= 20),
  mesh_id     TEXT    NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  name        TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
  description TEXT    NOT NULL DEFAULT '',
  visibility  TEXT    NOT NULL DEFAULT 'public' CHECK (visibility IN ('public', 'private', 'dm')),
  created_by  TEXT    NOT NULL,            -- member id
  created_at  INTEGER NOT NULL,
  UNIQUE (mesh_id, name)
) STRICT;

CREATE TABLE topic_member (
  topic_id     TEXT    NOT NULL REFERENCES topic(id) ON DELETE CASCADE,
  member_id    TEXT    NOT NULL REFERENCES member(id) ON DELETE CASCADE,
  role         TEXT    NOT NULL DEFAULT 'member' CHECK (role IN ('lead', 'member', 'observer')),
  joined_at    INTEGER NOT NULL,
  last_read_at INTEGER,
  PRIMARY KEY (topic_id, member_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX topic_member_member_idx ON topic_member (member_id);

-- The history query repeats the LIKE term, so that both planners use it.
CREATE INDEX message_topic_idx ON message (mesh_id, target_spec, id) WHERE target_spec LIKE '#%';
