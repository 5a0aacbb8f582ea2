-- Fewer index writes per received message. inbox_topic holds topic
-- messages only: a DM (topic NULL) was an entry no query reads, and a
-- `topic = ?` filter implies topic IS NOT NULL, so the partial index
-- serves it. events_created_at goes: only the hourly retention pass asked
-- for events by age, and it reads a log bounded to 100,000 events.
DROP INDEX inbox_topic;
CREATE INDEX inbox_topic ON inbox(topic) WHERE topic IS NOT NULL;
DROP INDEX events_created_at;
