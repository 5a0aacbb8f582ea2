-- When a row became dead (MarkDead, ExpireOld), Unix milliseconds. NULL for
-- rows that died before this column existed and for every other status.
ALTER TABLE outbox ADD COLUMN dead_at INTEGER;
