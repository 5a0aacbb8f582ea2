-- What upstream claudemesh's agents read of a message beside its text
-- (issue 38): the priority the sender gave it (now, next or low; NULL for
-- a message received before this migration) and when the sender's broker
-- took it (sent_at, the push's createdAt as the broker wrote it; NULL when
-- unknown).
ALTER TABLE inbox ADD COLUMN priority TEXT;
ALTER TABLE inbox ADD COLUMN sent_at TEXT;
