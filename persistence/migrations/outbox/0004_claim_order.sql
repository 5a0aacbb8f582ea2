-- The claim order (persistence.ClaimDue): a mesh's pending rows, oldest
-- first. Without it a claim read every due row through outbox_pending and
-- sorted them all to take the first few: with a backlog of thousands,
-- every claim sorted thousands. Partial: only pending rows are in it, so a
-- row claimed at its insert (the common case) never is.
CREATE INDEX outbox_claim ON outbox(mesh, enqueued_at, id) WHERE status = 'pending';
