-- delivery_queue_message_idx (0002) is the leading column of the UNIQUE
-- (message_id, recipient_pubkey) index every delivery row already has,
-- which serves client_ack and the message-pruning cascade alike: the
-- second index only cost a page written at every accept.
DROP INDEX delivery_queue_message_idx;
