-- Agent mail on the sender's side (issue 20). A row keeps its message's
-- mail header in the clear (mail: the header's JSON, as messages.Mail
-- encodes it; NULL for a message without one), its thread (thread_id, the
-- one the header names) and whether it asked for acknowledgements
-- (ack_required), for the sender's views: a thread, and "my messages
-- still waiting for acknowledgements".
ALTER TABLE outbox ADD COLUMN mail TEXT;
ALTER TABLE outbox ADD COLUMN thread_id TEXT;
ALTER TABLE outbox ADD COLUMN ack_required INTEGER NOT NULL DEFAULT 0 CHECK (ack_required = 0 OR ack_required = 1);
CREATE INDEX outbox_awaiting_ack ON outbox(enqueued_at) WHERE ack_required = 1;
CREATE INDEX outbox_thread ON outbox(thread_id) WHERE thread_id IS NOT NULL;

-- What recipients' daemons said about a row's message, each said once
-- (the primary key: a receipt pushed again changes nothing): an
-- acknowledgement (ack), or what a contact policy did with it — held as a
-- contact request until `until`, refused (reason), accepted. peer_pubkey
-- is the key that sent the receipt, which for a DM is the key the message
-- went to; at is when the broker took the receipt (Unix ms).
CREATE TABLE outbox_receipt (
  mesh              TEXT    NOT NULL,
  client_message_id TEXT    NOT NULL,
  kind              TEXT    NOT NULL CHECK (kind = 'ack' OR kind = 'held' OR kind = 'refused' OR kind = 'accepted'),
  peer_pubkey       TEXT    NOT NULL,
  peer_name         TEXT    NOT NULL,
  at                INTEGER NOT NULL,
  until             INTEGER,
  reason            TEXT,
  PRIMARY KEY (mesh, client_message_id, kind, peer_pubkey)
) STRICT, WITHOUT ROWID;

-- A receipt is part of its row's record: audited like a transition.
CREATE TRIGGER audit_outbox_receipt AFTER INSERT ON outbox_receipt
BEGIN
  INSERT INTO audit_append (kind, subject, detail)
    VALUES ('outbox.receipt', NEW.client_message_id,
            json_patch('{}', json_object('mesh', NEW.mesh, 'kind', NEW.kind, 'peer', NEW.peer_pubkey,
                                         'until', NEW.until, 'reason', NEW.reason)));
END;
