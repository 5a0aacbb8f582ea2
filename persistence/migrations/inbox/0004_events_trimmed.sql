-- The highest event id trimmed from the log. The id sequence jumps each
-- time inbox.db is opened (persistence.EventIDGap), so the log has holes
-- and its lowest id no longer says what was trimmed: a client resuming
-- after an id below this one missed events that are gone.
CREATE TABLE events_trimmed (
  one     INTEGER PRIMARY KEY CHECK (one = 1),
  through INTEGER NOT NULL
);
INSERT INTO events_trimmed (one, through)
SELECT 1, coalesce((SELECT min(id) FROM events) - 1,
                   (SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0);
