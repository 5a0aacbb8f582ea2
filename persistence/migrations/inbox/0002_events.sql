-- The persisted SSE event log (ARCHITECTURE A24): a bounded, contiguous
-- suffix of events so a client reconnecting with Last-Event-ID can be given
-- what it missed. AUTOINCREMENT: an id is never reused, even after the
-- newest rows are trimmed. created_at is Unix milliseconds.
CREATE TABLE events (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  name        TEXT NOT NULL,
  data        TEXT NOT NULL,                 -- one line of JSON
  created_at  INTEGER NOT NULL
);
CREATE INDEX events_created_at ON events(created_at);
