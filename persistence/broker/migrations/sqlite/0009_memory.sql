-- Memory (wire protocol §2.2 remember/recall/forget): what a mesh's
-- members remember, searched by relevance. A memory has an upstream-style
-- id (32 random [0-9A-Za-z]), its content (size-capped by the store), its
-- tags (a JSON array of strings, filtered on, not searched) and who
-- remembered it when (the member's pubkey, and its display name then).
-- memory_fts is an external-content FTS5 index of the content, kept in
-- step by the triggers; seq is the rowid it points at. The porter stemmer
-- over unicode61 matches PostgreSQL's 'english' configuration closely
-- enough that a query finds the same memories on both backends. Forget
-- deletes the row (and by trigger its index entry): nothing is kept.
-- Keep in step with ../postgres/0009_memory.sql.
CREATE TABLE memory (
  seq                INTEGER PRIMARY KEY,
  id                 TEXT    NOT NULL UNIQUE CHECK (length(id) >= 20),
  mesh_id            TEXT    NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  content            TEXT    NOT NULL CHECK (length(content) >= 1),
  tags               TEXT    NOT NULL DEFAULT '[]' CHECK (json_type(tags) = 'array'),
  remembered_by      TEXT    NOT NULL,     -- member pubkey
  remembered_by_name TEXT    NOT NULL,     -- its display name when it remembered
  remembered_at      INTEGER NOT NULL
) STRICT;
CREATE INDEX memory_mesh_idx ON memory (mesh_id, remembered_at); -- then seq: newest first, in index order

CREATE VIRTUAL TABLE memory_fts USING fts5(content, content = 'memory', content_rowid = 'seq',
  tokenize = 'porter unicode61');

CREATE TRIGGER memory_fts_insert AFTER INSERT ON memory BEGIN
  INSERT INTO memory_fts (rowid, content) VALUES (new.seq, new.content);
END;
CREATE TRIGGER memory_fts_delete AFTER DELETE ON memory BEGIN
  INSERT INTO memory_fts (memory_fts, rowid, content) VALUES ('delete', old.seq, old.content);
END;
CREATE TRIGGER memory_fts_update AFTER UPDATE OF content ON memory BEGIN
  INSERT INTO memory_fts (memory_fts, rowid, content) VALUES ('delete', old.seq, old.content);
  INSERT INTO memory_fts (rowid, content) VALUES (new.seq, new.content);
END;
