-- A client_message_id belongs to its sender (issue 16, defect 1): the
-- dedupe key becomes (mesh_id, sender_pubkey, client_message_id), where
-- sender_pubkey is the key the broker stamps as the message's sender (the
-- member key of a hello connection, the session key of a session_hello
-- or of an upstream hello with a sessionPubkey). Two senders of one mesh
-- may use one id; the same sender's retry still meets its row.
--
-- Existing rows take the sender of their message (the message row the
-- dedupe row names by broker_message_id). A row whose message is gone
-- (pruned after MessageRetention, or an orphan) cannot say who sent it:
-- it gets sender_pubkey '' ("unknown"), and such a row answers the id for
-- every sender of its mesh, as every row did before this migration — a
-- retry of that old request is still a duplicate (200, history_available
-- false), never a second message; another sender reusing that id meets
-- the pre-0005 answer. No row is written with '' after this migration, so
-- they only go away (retention). SQLite cannot change a primary key in
-- place: the table is rebuilt, WITHOUT ROWID and STRICT as before, with
-- its index. Keep in step with ../postgres/0005_dedupe_per_sender.sql.
CREATE TABLE client_message_dedupe_0005 (
  mesh_id             TEXT    NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  sender_pubkey       TEXT    NOT NULL  -- '' only for a row from before 0005 whose message was gone
                      CHECK (sender_pubkey = '' OR (length(sender_pubkey) = 64 AND sender_pubkey NOT GLOB '*[^0-9a-f]*')),
  client_message_id   TEXT    NOT NULL,
  broker_message_id   TEXT    NOT NULL,  -- no FK: the message row may be pruned first
  request_fingerprint BLOB    NOT NULL CHECK (length(request_fingerprint) = 32),
  destination_kind    TEXT    NOT NULL CHECK (destination_kind IN ('topic', 'dm', 'queue')),
  destination_ref     TEXT    NOT NULL,
  first_seen_at       INTEGER NOT NULL,
  expires_at          INTEGER,           -- NULL ⇔ the mesh's dedupe_mode is 'permanent'
  history_available   INTEGER NOT NULL DEFAULT 1 CHECK (history_available IN (0, 1)),
  PRIMARY KEY (mesh_id, sender_pubkey, client_message_id)
) STRICT, WITHOUT ROWID;

INSERT INTO client_message_dedupe_0005 (mesh_id, sender_pubkey, client_message_id, broker_message_id,
       request_fingerprint, destination_kind, destination_ref, first_seen_at, expires_at, history_available)
SELECT d.mesh_id, COALESCE(m.sender_pubkey, ''), d.client_message_id, d.broker_message_id,
       d.request_fingerprint, d.destination_kind, d.destination_ref, d.first_seen_at, d.expires_at, d.history_available
  FROM client_message_dedupe d LEFT JOIN message m ON m.id = d.broker_message_id;

DROP TABLE client_message_dedupe;
ALTER TABLE client_message_dedupe_0005 RENAME TO client_message_dedupe;
CREATE INDEX client_message_dedupe_expires_idx
  ON client_message_dedupe(expires_at) WHERE expires_at IS NOT NULL;
-- The rows of unknown sender, by id: the accept looks here for an id's
-- pre-0005 row while any is left (usually none: then this is empty).
CREATE INDEX client_message_dedupe_unknown_sender_idx
  ON client_message_dedupe(mesh_id, client_message_id) WHERE sender_pubkey = '';
