-- Topics (wire protocol §2.7). Keep in step with ../sqlite/0007_topics.sql,
-- which says what the tables hold.
CREATE TABLE topic (
  id          TEXT        PRIMARY KEY CHECK (length(id) >= 20),
  mesh_id     TEXT        NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  name        TEXT        NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
  description TEXT        NOT NULL DEFAULT '',
  visibility  TEXT        NOT NULL DEFAULT 'public' CHECK (visibility IN ('public', 'private', 'dm')),
  created_by  TEXT        NOT NULL,        -- member id
  created_at  TIMESTAMPTZ NOT NULL,
  UNIQUE (mesh_id, name)
);

CREATE TABLE topic_member (
  topic_id     TEXT        NOT NULL REFERENCES topic(id) ON DELETE CASCADE,
  member_id    TEXT        NOT NULL REFERENCES member(id) ON DELETE CASCADE,
  role         TEXT        NOT NULL DEFAULT 'member' CHECK (role IN ('lead', 'member', 'observer')),
  joined_at    TIMESTAMPTZ NOT NULL,
  last_read_at TIMESTAMPTZ,
  PRIMARY KEY (topic_id, member_id)
);
CREATE INDEX topic_member_member_idx ON topic_member (member_id);

CREATE INDEX message_topic_idx ON message (mesh_id, target_spec, id) WHERE target_spec LIKE '#%';
