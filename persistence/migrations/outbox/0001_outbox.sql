-- The daemon's durable outbound queue (spec §4.4, plus mesh and history_id).
-- Timestamps are Unix milliseconds. Rows are never deleted: an id written
-- here is never released.
CREATE TABLE outbox (
  id                  TEXT PRIMARY KEY,            -- ULID, local row id
  client_message_id   TEXT NOT NULL UNIQUE,        -- daemon-layer idempotency key
  mesh                TEXT NOT NULL,               -- slug of the mesh it goes to
  request_fingerprint BLOB NOT NULL CHECK(length(request_fingerprint) = 32),
  payload             BLOB NOT NULL,               -- the broker send frame, resent byte for byte
  enqueued_at         INTEGER NOT NULL,
  attempts            INTEGER NOT NULL DEFAULT 0,
  next_attempt_at     INTEGER NOT NULL,
  status              TEXT NOT NULL DEFAULT 'pending' CHECK(status IN
                        ('pending','inflight','done','dead','aborted')),
  last_error          TEXT,
  delivered_at        INTEGER,                     -- set when the broker acknowledges acceptance
  broker_message_id   TEXT,
  history_id          TEXT,
  aborted_at          INTEGER,
  aborted_by          TEXT CHECK(aborted_by IN ('operator','auto')),
  superseded_by       TEXT                         -- id of the row a requeue created
);
CREATE INDEX outbox_pending ON outbox(status, next_attempt_at);
CREATE INDEX outbox_aborted ON outbox(status, aborted_at) WHERE status = 'aborted';
