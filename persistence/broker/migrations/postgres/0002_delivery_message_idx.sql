-- client_ack and the message-pruning cascade find delivery rows by message.
CREATE INDEX delivery_queue_message_idx ON delivery_queue(message_id);
