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
-- it keeps sender_pubkey '' ("unknown"), and such a row answers the id
-- for every sender of its mesh, as every row did before this migration —
-- a retry of that old request is still a duplicate (200,
-- history_available false), never a second message; another sender
-- reusing that id meets the pre-0005 answer. No row is written with ''
-- after this migration (the column has no default), so they only go away
-- (retention). A replica still running the previous binary fails its
-- accepts (its ON CONFLICT names a key that no longer exists) with a 5xx
-- that the daemon retries: upgrade every replica. The table is locked
-- while this runs. Keep in step with ../sqlite/0005_dedupe_per_sender.sql.
ALTER TABLE client_message_dedupe ADD COLUMN sender_pubkey TEXT NOT NULL DEFAULT '';
UPDATE client_message_dedupe d SET sender_pubkey = m.sender_pubkey
  FROM message m WHERE m.id = d.broker_message_id;
ALTER TABLE client_message_dedupe ALTER COLUMN sender_pubkey DROP DEFAULT;
ALTER TABLE client_message_dedupe
  ADD CONSTRAINT client_message_dedupe_sender_pubkey_check
      CHECK (sender_pubkey = '' OR sender_pubkey ~ '^[0-9a-f]{64}$'),
  DROP CONSTRAINT client_message_dedupe_pkey,
  ADD PRIMARY KEY (mesh_id, sender_pubkey, client_message_id);
-- The rows of unknown sender, by id: the accept looks here for an id's
-- pre-0005 row while any is left (usually none: then this is empty).
CREATE INDEX client_message_dedupe_unknown_sender_idx
  ON client_message_dedupe(mesh_id, client_message_id) WHERE sender_pubkey = '';
