-- Receiver dedupe per sender: (mesh, sender_pubkey, client_message_id) is
-- unique. A client_message_id belongs to its sender (outbox migration
-- 0006): two agents of one machine, or two agent sessions, may use the
-- same id for different messages, and a recipient must keep both. The
-- table is rebuilt (SQLite cannot drop an inline UNIQUE), keeping every
-- column and the indexes as 0005 and 0006 left them.
CREATE TABLE inbox_new (
  id                  TEXT PRIMARY KEY,
  client_message_id   TEXT NOT NULL,
  broker_message_id   TEXT,
  mesh                TEXT NOT NULL,
  topic               TEXT,
  sender_pubkey       TEXT NOT NULL,
  sender_name         TEXT NOT NULL,
  body                TEXT,
  meta                TEXT,
  received_at         INTEGER NOT NULL,
  reply_to_id         TEXT,
  seen_at             INTEGER,
  recipient_pubkey    TEXT,
  recipient_kind      TEXT,
  UNIQUE (mesh, sender_pubkey, client_message_id)
);
INSERT INTO inbox_new (id, client_message_id, broker_message_id, mesh, topic, sender_pubkey, sender_name, body, meta,
                       received_at, reply_to_id, seen_at, recipient_pubkey, recipient_kind)
  SELECT id, client_message_id, broker_message_id, mesh, topic, sender_pubkey, sender_name, body, meta, received_at,
         reply_to_id, seen_at, recipient_pubkey, recipient_kind
    FROM inbox;
DROP TABLE inbox;
ALTER TABLE inbox_new RENAME TO inbox;
CREATE INDEX inbox_received_at ON inbox(received_at);
CREATE INDEX inbox_topic ON inbox(topic) WHERE topic IS NOT NULL;
CREATE INDEX inbox_sender ON inbox(sender_pubkey);
CREATE INDEX inbox_unseen ON inbox(mesh, received_at) WHERE seen_at IS NULL;
