-- One index for the rows still being sent (pending and inflight), in the
-- order a claim takes them: a mesh's pending rows oldest first, with their
-- due time at hand. It replaces outbox_pending(status, next_attempt_at),
-- which held every row of the outbox's history and made a claim read every
-- due row and sort them all to take the first few (with a backlog of
-- thousands, every claim sorted thousands). A row that is done, dead or
-- aborted leaves it, so it stays the size of the queue; a row written and
-- delivered costs the same index writes as before, one query serves the
-- claim, the release of a mesh's inflight rows, the recovery at start and
-- the max-age sweep.
DROP INDEX outbox_pending;
CREATE INDEX outbox_queue ON outbox(status, mesh, enqueued_at, id, next_attempt_at)
  WHERE status = 'pending' OR status = 'inflight';
