-- The search index is filled in bulk instead of by a trigger at each
-- insert (Inbox.IndexPending): a received message no longer pays for
-- FTS5's tokenizer and a new index segment in its own transaction (three
-- to four more pages written at every commit). inbox_fts_state.through is
-- the last seq the index holds; the rows past it are indexed by the next
-- search, or once IndexEvery of them have arrived. A delete or an edit
-- touches the index only for a row it holds, and a delete lowers the mark
-- to the table's last seq, so that a seq SQLite hands out again (the
-- largest plus one) is never taken for indexed.
DROP TRIGGER inbox_fts_insert;
DROP TRIGGER inbox_fts_delete;
DROP TRIGGER inbox_fts_update;

CREATE TABLE inbox_fts_state (
  id      INTEGER PRIMARY KEY CHECK (id = 1),
  through INTEGER NOT NULL
);
INSERT INTO inbox_fts_state (id, through) SELECT 1, COALESCE(MAX(seq), 0) FROM inbox;

CREATE TRIGGER inbox_fts_delete AFTER DELETE ON inbox BEGIN
  INSERT INTO inbox_fts (inbox_fts, rowid, subject, body)
    SELECT 'delete', old.seq, old.subject, old.body WHERE old.seq <= (SELECT through FROM inbox_fts_state);
  UPDATE inbox_fts_state SET through = MIN(through, (SELECT COALESCE(MAX(seq), 0) FROM inbox));
END;
CREATE TRIGGER inbox_fts_update AFTER UPDATE OF subject, body ON inbox
  WHEN old.seq <= (SELECT through FROM inbox_fts_state) BEGIN
  INSERT INTO inbox_fts (inbox_fts, rowid, subject, body) VALUES ('delete', old.seq, old.subject, old.body);
  INSERT INTO inbox_fts (rowid, subject, body) VALUES (new.seq, new.subject, new.body);
END;
