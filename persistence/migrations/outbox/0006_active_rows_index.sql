-- outbox_pending holds the rows still being sent (pending and inflight),
-- which are all its queries look for: a row that is done, dead or aborted
-- leaves it, instead of being written into it again under its new status.
-- Every delivered message costs one index write less, and the index stays
-- the size of the queue, not of the outbox's history.
DROP INDEX outbox_pending;
CREATE INDEX outbox_pending ON outbox(status, next_attempt_at) WHERE status = 'pending' OR status = 'inflight';
