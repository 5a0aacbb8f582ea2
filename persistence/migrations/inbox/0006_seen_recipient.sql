-- Read state and the recipient of each received message. seen_at (Unix
-- ms) is stamped by GET /v1/inbox (an agent session's read marks by
-- default) or POST /v1/inbox/seen; NULL is unread. recipient_pubkey is the
-- key the message reached (a session's key, or the member's) and
-- recipient_kind says which ('session' | 'member').
ALTER TABLE inbox ADD COLUMN seen_at INTEGER;
ALTER TABLE inbox ADD COLUMN recipient_pubkey TEXT;
ALTER TABLE inbox ADD COLUMN recipient_kind TEXT;
CREATE INDEX inbox_unseen ON inbox(mesh, received_at) WHERE seen_at IS NULL;
