-- A client_message_id belongs to its sender: unique per (client_message_id,
-- mesh), not daemon-wide. The mesh column is the sender — a membership's
-- slug (an agent of `claudemesh daemon add-agent` is one) or an agent
-- session's route "<mesh>/<session id>" — and two senders using one id
-- must never touch each other's rows (issue 16, defect 1: the second
-- agent's send was answered as the first's duplicate and never sent).
--
-- The fingerprint covers the sender too (messages.Fingerprint.Scoped).
-- Rows written before this migration keep the §4.3 fingerprint they were
-- stored and sent with: fingerprint_version says which form a row holds
-- (1: §4.3 alone, 2: scoped), and a retry of an old row is compared in
-- its own form (persistence.decide).
--
-- SQLite cannot drop an inline UNIQUE, so the table is rebuilt, in this
-- migration's transaction: every row is copied with its state; the status
-- CHECK is written as comparisons (0005), dead_at kept (0002), and the
-- indexes are those of 0001 (outbox_aborted), 0003 (outbox_done_payload)
-- and 0004 (outbox_queue), exactly. The UNIQUE's index has the id first,
-- so a look-up by id alone (GET /v1/outbox?client_message_id=) uses it too.
CREATE TABLE outbox_new (
  id                  TEXT PRIMARY KEY,            -- ULID, local row id
  client_message_id   TEXT NOT NULL,               -- daemon-layer idempotency key, the sender's own
  mesh                TEXT NOT NULL,               -- the sender: a membership's slug or a session's route
  request_fingerprint BLOB NOT NULL CHECK(length(request_fingerprint) = 32),
  payload             BLOB NOT NULL,               -- the broker send frame, resent byte for byte
  enqueued_at         INTEGER NOT NULL,
  attempts            INTEGER NOT NULL DEFAULT 0,
  next_attempt_at     INTEGER NOT NULL,
  status              TEXT NOT NULL DEFAULT 'pending' CHECK(status = 'pending' OR status = 'inflight' OR status = 'done' OR status = 'dead' OR status = 'aborted'),
  last_error          TEXT,
  delivered_at        INTEGER,                     -- set when the broker acknowledges acceptance
  broker_message_id   TEXT,
  history_id          TEXT,
  aborted_at          INTEGER,
  aborted_by          TEXT CHECK(aborted_by IN ('operator','auto')),
  superseded_by       TEXT,                        -- id of the row a requeue created
  dead_at             INTEGER,
  fingerprint_version INTEGER NOT NULL DEFAULT 2 CHECK(fingerprint_version = 1 OR fingerprint_version = 2),
  UNIQUE (client_message_id, mesh)
);
INSERT INTO outbox_new (id, client_message_id, mesh, request_fingerprint, payload, enqueued_at, attempts,
                        next_attempt_at, status, last_error, delivered_at, broker_message_id, history_id,
                        aborted_at, aborted_by, superseded_by, dead_at, fingerprint_version)
  SELECT id, client_message_id, mesh, request_fingerprint, payload, enqueued_at, attempts,
         next_attempt_at, status, last_error, delivered_at, broker_message_id, history_id,
         aborted_at, aborted_by, superseded_by, dead_at, 1
    FROM outbox;
DROP TABLE outbox;
ALTER TABLE outbox_new RENAME TO outbox;
CREATE INDEX outbox_aborted ON outbox(status, aborted_at) WHERE status = 'aborted';
CREATE INDEX outbox_done_payload ON outbox(delivered_at) WHERE status = 'done' AND length(payload) > 0;
CREATE INDEX outbox_queue ON outbox(status, mesh, enqueued_at, id, next_attempt_at)
  WHERE status = 'pending' OR status = 'inflight';
