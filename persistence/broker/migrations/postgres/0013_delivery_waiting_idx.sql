-- The relay poll (WaitingRecipients) looks, every few seconds on every
-- replica, for rows created unleased a poll interval ago and not claimed
-- since: a notification a replica missed. This index holds only the rows
-- nobody has claimed yet, so the look is a short range scan whatever the
-- size of the queue, and a row pushed at its accept (created leased) never
-- enters it.
-- Keep in step with ../sqlite/0013_delivery_waiting_idx.sql.
CREATE INDEX delivery_queue_waiting_idx
  ON delivery_queue(created_at) WHERE delivered_at IS NULL AND lease_expires_at IS NULL;
