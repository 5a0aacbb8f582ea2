-- Memory (wire protocol §2.2). Keep in step with ../sqlite/0009_memory.sql,
-- which says what the table holds. search is the content's tsvector
-- ('english': stemmed, stop words dropped), indexed with GIN; tags is a
-- JSON array, indexed with GIN for the @> filter.
CREATE TABLE memory (
  id                 TEXT        PRIMARY KEY CHECK (length(id) >= 20),
  mesh_id            TEXT        NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  content            TEXT        NOT NULL CHECK (length(content) >= 1),
  tags               JSONB       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(tags) = 'array'),
  remembered_by      TEXT        NOT NULL, -- member pubkey
  remembered_by_name TEXT        NOT NULL, -- its display name when it remembered
  remembered_at      TIMESTAMPTZ NOT NULL,
  search             tsvector    GENERATED ALWAYS AS (to_tsvector('english', content)) STORED
);
CREATE INDEX memory_mesh_idx ON memory (mesh_id, remembered_at, id); -- newest first, in index order
CREATE INDEX memory_search_idx ON memory USING GIN (search);
CREATE INDEX memory_tags_idx ON memory USING GIN (tags jsonb_path_ops);
