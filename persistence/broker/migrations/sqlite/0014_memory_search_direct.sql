-- Recall's index made compact: FTS5 keeps what remembers add in segments
-- that each search reads and merges; merging them into one now makes a
-- database's recall as quick as a fresh one's (FTS5's own automerge keeps
-- the segments few from there). PostgreSQL's counterpart turns GIN's
-- pending list off. Keep in step with ../postgres/0014_memory_search_direct.sql.
INSERT INTO memory_fts (memory_fts) VALUES ('optimize');
