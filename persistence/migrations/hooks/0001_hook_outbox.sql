-- The agent-hook outbox (spec/hook-outbox.md). `claudemesh hook` inserts
-- rows (session_id, agent, event_type, payload, created_at and
-- next_attempt_at = now); the daemon's hooks worker claims, handles and
-- marks them. IF NOT EXISTS: receivers that find no table create it, and
-- several may race to.
CREATE TABLE IF NOT EXISTS hook_outbox (
  id              INTEGER PRIMARY KEY,
  session_id      TEXT    NOT NULL,
  agent           TEXT    NOT NULL,
  event_type      TEXT    NOT NULL,
  payload         TEXT    NOT NULL,  -- normalized JSON (messages/hookevent)
  created_at      INTEGER NOT NULL,  -- ms; the FIFO order key, with id
  next_attempt_at INTEGER NOT NULL,  -- ms; a new row is due at once
  attempt_count   INTEGER NOT NULL DEFAULT 0,
  locked_at       INTEGER,           -- ms; set by a claim, NULL when free
  delivered_at    INTEGER,           -- ms; set when done, failed for good, coalesced or evicted
  outcome         TEXT,              -- with delivered_at: delivered | failed | coalesced | evicted
  last_error      TEXT               -- the last failure, or a coalesced/evicted row's note
);

-- The claim walks the undelivered rows oldest first.
CREATE INDEX IF NOT EXISTS hook_outbox_due ON hook_outbox (created_at, id) WHERE delivered_at IS NULL;
-- A row that failed and waits for its retry holds back the later rows of
-- its session (per-session FIFO); those rows are few, so the claim's check
-- for one is an index probe.
CREATE INDEX IF NOT EXISTS hook_outbox_retrying ON hook_outbox (session_id, created_at, id)
  WHERE delivered_at IS NULL AND attempt_count > 0;
-- Pruning (delivered more than 7 days ago) and the count of failures.
CREATE INDEX IF NOT EXISTS hook_outbox_delivered ON hook_outbox (delivered_at) WHERE delivered_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS hook_outbox_failed ON hook_outbox (delivered_at) WHERE outcome = 'failed';
