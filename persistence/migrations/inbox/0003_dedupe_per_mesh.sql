-- Receiver dedupe per membership: (mesh, client_message_id) is unique, not
-- client_message_id alone. Agents of one machine are members of one mesh
-- (`claudemesh daemon add-agent`), and a topic or broadcast message reaches
-- each of them under the same client_message_id; so does one id sent to two
-- meshes. SQLite cannot drop an inline UNIQUE: the table is rebuilt.
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
  UNIQUE (mesh, client_message_id)
);
INSERT INTO inbox_new (id, client_message_id, broker_message_id, mesh, topic, sender_pubkey, sender_name, body, meta,
                       received_at, reply_to_id)
  SELECT id, client_message_id, broker_message_id, mesh, topic, sender_pubkey, sender_name, body, meta, received_at, reply_to_id
    FROM inbox;
DROP TABLE inbox;
ALTER TABLE inbox_new RENAME TO inbox;
CREATE INDEX inbox_received_at ON inbox(received_at);
CREATE INDEX inbox_topic       ON inbox(topic);
CREATE INDEX inbox_sender      ON inbox(sender_pubkey);
