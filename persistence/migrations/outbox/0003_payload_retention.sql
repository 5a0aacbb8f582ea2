-- Payload retention (ARCHITECTURE "Retention"): once a row is done or
-- aborted and older than [outbox] retention_days, its payload is replaced
-- by an empty blob. The row, its id and fingerprint stay: an id is never
-- released. This index holds only the done rows whose payload is still
-- there, so each retention pass reads what it will change and nothing else
-- (aborted rows, few, are found through outbox_aborted).
CREATE INDEX outbox_done_payload ON outbox(delivered_at) WHERE status = 'done' AND length(payload) > 0;
