-- Topic membership per agent session (issue 38): a session_hello
-- connection joins, leads, leaves and marks a topic read as its session,
-- not as the member whose attestation it holds, so that one agent's join
-- or leave no longer acts for every session of its machine. A row is the
-- member itself (session_pubkey '', how a member connection and an
-- upstream hello join, as upstream's topics are) or one of its sessions
-- (session_pubkey its key, session_name the name it joined with, which
-- topic_members lists). A send to `#<id>` reaches the members joined as
-- themselves and the joined sessions connected then. SQLite cannot change
-- a primary key in place: the table is rebuilt, WITHOUT ROWID and STRICT
-- as before, with its index; every row so far is a member's. Keep in step
-- with ../postgres/0021_topic_sessions.sql.
CREATE TABLE topic_member_0021 (
  topic_id       TEXT    NOT NULL REFERENCES topic(id) ON DELETE CASCADE,
  member_id      TEXT    NOT NULL REFERENCES member(id) ON DELETE CASCADE,
  session_pubkey TEXT    NOT NULL DEFAULT ''
                 CHECK (session_pubkey = '' OR (length(session_pubkey) = 64 AND session_pubkey NOT GLOB '*[^0-9a-f]*')),
  session_name   TEXT    NOT NULL DEFAULT '',
  role           TEXT    NOT NULL DEFAULT 'member' CHECK (role IN ('lead', 'member', 'observer')),
  joined_at      INTEGER NOT NULL,
  last_read_at   INTEGER,
  PRIMARY KEY (topic_id, member_id, session_pubkey)
) STRICT, WITHOUT ROWID;

INSERT INTO topic_member_0021 (topic_id, member_id, role, joined_at, last_read_at)
SELECT topic_id, member_id, role, joined_at, last_read_at FROM topic_member;

DROP TABLE topic_member;
ALTER TABLE topic_member_0021 RENAME TO topic_member;
CREATE INDEX topic_member_member_idx ON topic_member (member_id);
