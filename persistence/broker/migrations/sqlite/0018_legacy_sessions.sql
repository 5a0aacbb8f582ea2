-- A session row of a legacy hello (upstream's CLI: a hello naming a
-- sessionPubkey, whose connection receives for the session key and its
-- member's). Such a session is a DM recipient at every replica, but not
-- one of "*", "#topic" and the like, which reach it by its member key, as
-- at its own replica. Keep in step with ../postgres/0018_legacy_sessions.sql.
ALTER TABLE mesh_session ADD COLUMN legacy INTEGER NOT NULL DEFAULT 0 CHECK (legacy IN (0, 1));
