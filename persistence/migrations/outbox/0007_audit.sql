-- The audit log (issue 15, item 3): every transition of an outbox row is
-- appended to a hash-chained log, in the transaction of the transition
-- itself. Triggers write it, so no statement can change an outbox row's
-- status without its entry, and a transition rolled back (a failed
-- savepoint, a failed commit) leaves no entry either.
--
-- Each entry carries the hash of the one before (prev_hash; 64 zeros for
-- seq 1) and its own hash, hex SHA-256 of (prev_hash, seq, at, kind,
-- subject, detail) as messages.AuditHash encodes them; the SQL function
-- audit_hash is that Go function, registered with the driver by the
-- persistence package with audit_now. A connection without them (the
-- sqlite3 shell) cannot change an outbox row at all: "no such function".
--
-- seq is max(seq) + 1 and prev_hash the newest entry's hash, read in the
-- trigger with one look-up (a bare column beside max() is read from the
-- row that has the max): race-free because the store actor is the only
-- writer of outbox.db (one connection, BEGIN IMMEDIATE). at is Unix
-- milliseconds, like the outbox's times, from audit_now(), Go's clock:
-- SQLite's 'now' costs a system call each time.
-- Retention deletes the oldest entries, never the newest, so seq never
-- goes back (persistence.PruneAudit).
CREATE TABLE audit (
  seq       INTEGER PRIMARY KEY,
  at        INTEGER NOT NULL,
  kind      TEXT NOT NULL,
  subject   TEXT NOT NULL,
  detail    TEXT NOT NULL,   -- a JSON object; hashed as this exact text
  prev_hash TEXT NOT NULL,
  hash      TEXT NOT NULL
);
-- audit_append is where every trigger writes: it gives the entry its seq,
-- at, prev_hash and hash. To audit another table, copy the pattern of the
-- outbox triggers below:
--
--   CREATE TRIGGER audit_lock_acquired AFTER INSERT ON held_locks
--   BEGIN
--     INSERT INTO audit_append (kind, subject, detail)
--       VALUES ('lock.acquired', NEW.name, json_object('mesh', NEW.mesh, 'holder', NEW.holder));
--   END;
--
-- kind is "<table's noun>.<what happened>"; subject the row's key as users
-- know it; detail a JSON object built with json_object (wrapped in
-- json_patch('{}', …) to leave out NULL members). A migration that rebuilds
-- an audited table (CREATE new, copy, DROP, RENAME, as 0006 did) drops its
-- triggers: it must create them again.
CREATE VIEW audit_append (kind, subject, detail) AS SELECT kind, subject, detail FROM audit;
CREATE TRIGGER audit_append_entry INSTEAD OF INSERT ON audit_append
BEGIN
  INSERT INTO audit (seq, at, kind, subject, detail, prev_hash, hash)
    SELECT seq, at, NEW.kind, NEW.subject, NEW.detail, prev,
           audit_hash(prev, seq, at, NEW.kind, NEW.subject, NEW.detail)
      FROM (SELECT ifnull(max(seq), 0) + 1 AS seq, audit_now() AS at,
                   ifnull(hash, '0000000000000000000000000000000000000000000000000000000000000000') AS prev
              FROM audit);
END;
-- A new row: an accept (pending, or inflight when claimed at once) or a
-- requeue's successor (the aborted row's entry before it names it in
-- superseded_by).
CREATE TRIGGER audit_outbox_insert AFTER INSERT ON outbox
BEGIN
  INSERT INTO audit_append (kind, subject, detail)
    VALUES ('outbox.accepted', NEW.client_message_id,
            json_object('mesh', NEW.mesh, 'id', NEW.id, 'status', NEW.status, 'attempts', NEW.attempts));
END;
-- A change of status: claimed (inflight), done, retried or released
-- (pending), dead, aborted by an operator's requeue or drop. kind is
-- "outbox.<new status>".
CREATE TRIGGER audit_outbox_status AFTER UPDATE OF status ON outbox
WHEN OLD.status IS NOT NEW.status
BEGIN
  INSERT INTO audit_append (kind, subject, detail)
    VALUES ('outbox.' || NEW.status, NEW.client_message_id,
            json_patch('{}', json_object('mesh', NEW.mesh, 'id', NEW.id, 'from', OLD.status, 'to', NEW.status,
                                         'attempts', NEW.attempts, 'last_error', NEW.last_error,
                                         'broker_message_id', NEW.broker_message_id, 'aborted_by', NEW.aborted_by,
                                         'superseded_by', NEW.superseded_by)));
END;
-- Retention: a done or aborted row's payload emptied (rows are never
-- deleted; their ids stay taken).
CREATE TRIGGER audit_outbox_pruned AFTER UPDATE OF payload ON outbox
WHEN length(OLD.payload) > 0 AND length(NEW.payload) = 0
BEGIN
  INSERT INTO audit_append (kind, subject, detail)
    VALUES ('outbox.pruned', NEW.client_message_id,
            json_object('mesh', NEW.mesh, 'id', NEW.id, 'status', NEW.status, 'payload_bytes', length(OLD.payload)));
END;
-- No code deletes an outbox row; one deleted anyway is on the record.
CREATE TRIGGER audit_outbox_delete AFTER DELETE ON outbox
BEGIN
  INSERT INTO audit_append (kind, subject, detail)
    VALUES ('outbox.deleted', OLD.client_message_id,
            json_object('mesh', OLD.mesh, 'id', OLD.id, 'status', OLD.status));
END;
