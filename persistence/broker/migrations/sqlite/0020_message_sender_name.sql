-- The sender's display name as the accept knew it — its session's name,
-- else its member's — which the live push carries: a drain and the topic
-- history read it here, so that a message pushed after its sender's
-- session ended (its mesh_session row swept, or never written: SQLite
-- keeps none) is named as the live push named it. NULL for a message
-- accepted before this migration, whose name is looked up as before.
-- Keep in step with ../postgres/0020_message_sender_name.sql.
ALTER TABLE message ADD COLUMN sender_name TEXT;
