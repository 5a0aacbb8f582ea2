-- The sender's display name as the accept knew it: see
-- ../sqlite/0020_message_sender_name.sql.
ALTER TABLE message ADD COLUMN sender_name TEXT;
