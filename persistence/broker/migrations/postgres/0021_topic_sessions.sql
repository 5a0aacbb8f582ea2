-- Topic membership per agent session: see ../sqlite/0021_topic_sessions.sql.
-- Every row so far is a member's (session_pubkey ''). A replica still
-- running the previous binary fails its joins (their ON CONFLICT names a
-- key that no longer exists): upgrade every replica. The table is locked
-- while this runs.
ALTER TABLE topic_member
  ADD COLUMN session_pubkey TEXT NOT NULL DEFAULT ''
      CHECK (session_pubkey = '' OR session_pubkey ~ '^[0-9a-f]{64}$'),
  ADD COLUMN session_name TEXT NOT NULL DEFAULT '',
  DROP CONSTRAINT topic_member_pkey,
  ADD PRIMARY KEY (topic_id, member_id, session_pubkey);
