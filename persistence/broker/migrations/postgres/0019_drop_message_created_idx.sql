-- Retention finds old messages by id, a ULID of the message's created_at,
-- through the primary key (Store.pruneChunk): message_created_idx only cost
-- a page written at every accept. Keep in step with
-- ../sqlite/0019_drop_message_created_idx.sql.
DROP INDEX message_created_idx;
