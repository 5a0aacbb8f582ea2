-- Broker schema, SQLite. Times are Unix milliseconds (INTEGER); booleans
-- are 0/1. Keep in step with ../postgres/0001_init.sql.

CREATE TABLE mesh (
  id                    TEXT    PRIMARY KEY,            -- ULID
  slug                  TEXT    NOT NULL UNIQUE,
  created_at            INTEGER NOT NULL,
  dedupe_mode           TEXT    NOT NULL DEFAULT 'retention_scoped'
                                CHECK (dedupe_mode IN ('retention_scoped', 'permanent')),
  dedupe_retention_days INTEGER NOT NULL DEFAULT 365 CHECK (dedupe_retention_days >= 3),
  max_payload_bytes     INTEGER NOT NULL DEFAULT 65536 CHECK (max_payload_bytes >= 1024)
) STRICT;

CREATE TABLE member (
  id           TEXT    PRIMARY KEY,                     -- ULID
  mesh_id      TEXT    NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  pubkey       TEXT    NOT NULL CHECK (length(pubkey) = 64 AND pubkey NOT GLOB '*[^0-9a-f]*'),
  display_name TEXT    NOT NULL,
  created_at   INTEGER NOT NULL,
  revoked_at   INTEGER,
  status       TEXT    NOT NULL DEFAULT 'idle' CHECK (status IN ('idle', 'working', 'dnd')),
  summary      TEXT    NOT NULL DEFAULT '',
  visible      INTEGER NOT NULL DEFAULT 1 CHECK (visible IN (0, 1)),
  avatar       TEXT    NOT NULL DEFAULT '',
  title        TEXT    NOT NULL DEFAULT '',
  bio          TEXT    NOT NULL DEFAULT '',
  capabilities TEXT    NOT NULL DEFAULT '[]' CHECK (json_type(capabilities) = 'array'),
  UNIQUE (mesh_id, pubkey)
) STRICT;

CREATE TABLE invite (
  token_hash BLOB    PRIMARY KEY CHECK (length(token_hash) = 32),  -- SHA-256 of the token
  mesh_id    TEXT    NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  uses_left  INTEGER NOT NULL CHECK (uses_left >= 0),
  expires_at INTEGER NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;

-- Spec §4.9.1. A row exists exactly when an accept transaction committed.
CREATE TABLE client_message_dedupe (
  mesh_id             TEXT    NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  client_message_id   TEXT    NOT NULL,
  broker_message_id   TEXT    NOT NULL,  -- no FK: the message row may be pruned first
  request_fingerprint BLOB    NOT NULL CHECK (length(request_fingerprint) = 32),
  destination_kind    TEXT    NOT NULL CHECK (destination_kind IN ('topic', 'dm', 'queue')),
  destination_ref     TEXT    NOT NULL,
  first_seen_at       INTEGER NOT NULL,
  expires_at          INTEGER,           -- NULL ⇔ the mesh's dedupe_mode is 'permanent'
  history_available   INTEGER NOT NULL DEFAULT 1 CHECK (history_available IN (0, 1)),
  PRIMARY KEY (mesh_id, client_message_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX client_message_dedupe_expires_idx
  ON client_message_dedupe(expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE message (
  id                  TEXT    PRIMARY KEY,              -- broker_message_id (ULID)
  mesh_id             TEXT    NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  client_message_id   TEXT    NOT NULL,                 -- back-pointer, not unique
  request_fingerprint BLOB    NOT NULL,                 -- echoed on push
  sender_pubkey       TEXT    NOT NULL,
  target_spec         TEXT    NOT NULL,
  priority            TEXT    NOT NULL CHECK (priority IN ('now', 'next', 'low')),
  nonce               TEXT    NOT NULL,
  ciphertext          TEXT    NOT NULL,
  reply_to_id         TEXT,
  meta                TEXT,                             -- RFC 8785 JSON as sent, NULL when absent
  created_at          INTEGER NOT NULL
) STRICT;
CREATE INDEX message_created_idx ON message(created_at);

CREATE TABLE message_history (
  history_id TEXT    PRIMARY KEY,                       -- ULID
  mesh_id    TEXT    NOT NULL,
  message_id TEXT    NOT NULL UNIQUE REFERENCES message(id) ON DELETE CASCADE,
  created_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- One row per intended recipient. A row is claimable while delivered_at is
-- NULL and its lease is absent or expired.
CREATE TABLE delivery_queue (
  id               INTEGER PRIMARY KEY,
  mesh_id          TEXT    NOT NULL,
  message_id       TEXT    NOT NULL REFERENCES message(id) ON DELETE CASCADE,
  recipient_pubkey TEXT    NOT NULL
                   CHECK (length(recipient_pubkey) = 64 AND recipient_pubkey NOT GLOB '*[^0-9a-f]*'),
  created_at       INTEGER NOT NULL,
  lease_expires_at INTEGER,
  attempts         INTEGER NOT NULL DEFAULT 0,
  delivered_at     INTEGER,
  UNIQUE (message_id, recipient_pubkey)
) STRICT;
CREATE INDEX delivery_queue_pending_idx
  ON delivery_queue(mesh_id, recipient_pubkey, id) WHERE delivered_at IS NULL;
CREATE INDEX delivery_queue_lease_idx
  ON delivery_queue(lease_expires_at) WHERE delivered_at IS NULL AND lease_expires_at IS NOT NULL;
