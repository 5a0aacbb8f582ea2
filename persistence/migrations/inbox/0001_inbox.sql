-- Inbound history (spec §4.12). client_message_id is the receiver-side
-- dedupe key ("broker:<broker_message_id>" when the sender gave none).
CREATE TABLE inbox (
  id                  TEXT PRIMARY KEY,            -- ULID, local row id
  client_message_id   TEXT NOT NULL UNIQUE,
  broker_message_id   TEXT,
  mesh                TEXT NOT NULL,
  topic               TEXT,                        -- NULL for DMs
  sender_pubkey       TEXT NOT NULL,
  sender_name         TEXT NOT NULL,
  body                TEXT,
  meta                TEXT,                        -- JSON
  received_at         INTEGER NOT NULL,
  reply_to_id         TEXT
);
CREATE INDEX inbox_received_at ON inbox(received_at);
CREATE INDEX inbox_topic       ON inbox(topic);
CREATE INDEX inbox_sender      ON inbox(sender_pubkey);
