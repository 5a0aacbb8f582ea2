-- Display names are unique per mesh by their comparison key
-- (messages.NameKey: NFKC, case folding, UTS #39 confusable skeleton), among
-- the active members. SQL cannot compute the key: the store fills it for
-- rows that have none when it opens, first come first served; a row whose
-- key another active member already holds (a look-alike admitted before
-- this migration) keeps NULL, stays a member, and `broker member list`
-- reports it. Keep in step with ../postgres/0004_names_and_hello_replay.sql.
ALTER TABLE member ADD COLUMN name_key TEXT;
CREATE UNIQUE INDEX member_name_key_idx ON member (mesh_id, name_key)
  WHERE name_key IS NOT NULL AND revoked_at IS NULL;

-- Every hello and session_hello accepted within the clock-skew window, by
-- its signature (lowercase hex; ed25519 signatures are deterministic, so a
-- replayed hello has the same one): a second use is refused. Rows go once
-- their hello's timestamp is out of the window (expires_at).
CREATE TABLE hello_seen (
  signature  TEXT    PRIMARY KEY CHECK (length(signature) = 128),
  pubkey     TEXT    NOT NULL,
  expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX hello_seen_expires_idx ON hello_seen (expires_at);

-- Settings a running broker records for the provisioning commands, such as
-- the public URL `broker invite` puts in its links.
CREATE TABLE broker_setting (
  name       TEXT    PRIMARY KEY,
  value      TEXT    NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
