-- Broker schema, PostgreSQL. Keep in step with ../sqlite/0001_init.sql.

CREATE TABLE mesh (
  id                    TEXT        PRIMARY KEY,        -- ULID
  slug                  TEXT        NOT NULL UNIQUE,
  created_at            TIMESTAMPTZ NOT NULL DEFAULT NOW(),
  dedupe_mode           TEXT        NOT NULL DEFAULT 'retention_scoped'
                                    CHECK (dedupe_mode IN ('retention_scoped', 'permanent')),
  dedupe_retention_days INTEGER     NOT NULL DEFAULT 365 CHECK (dedupe_retention_days >= 3),
  max_payload_bytes     INTEGER     NOT NULL DEFAULT 65536 CHECK (max_payload_bytes >= 1024)
);

CREATE TABLE member (
  id           TEXT        PRIMARY KEY,                 -- ULID
  mesh_id      TEXT        NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  pubkey       TEXT        NOT NULL CHECK (pubkey ~ '^[0-9a-f]{64}$'),
  display_name TEXT        NOT NULL,
  created_at   TIMESTAMPTZ NOT NULL DEFAULT NOW(),
  revoked_at   TIMESTAMPTZ,
  status       TEXT        NOT NULL DEFAULT 'idle' CHECK (status IN ('idle', 'working', 'dnd')),
  summary      TEXT        NOT NULL DEFAULT '',
  visible      BOOLEAN     NOT NULL DEFAULT TRUE,
  avatar       TEXT        NOT NULL DEFAULT '',
  title        TEXT        NOT NULL DEFAULT '',
  bio          TEXT        NOT NULL DEFAULT '',
  capabilities JSONB       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(capabilities) = 'array'),
  UNIQUE (mesh_id, pubkey)
);

CREATE TABLE invite (
  token_hash BYTEA       PRIMARY KEY CHECK (octet_length(token_hash) = 32),  -- SHA-256 of the token
  mesh_id    TEXT        NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  uses_left  INTEGER     NOT NULL CHECK (uses_left >= 0),
  expires_at TIMESTAMPTZ NOT NULL,
  created_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);

-- Spec §4.9.1. A row exists exactly when an accept transaction committed.
CREATE TABLE client_message_dedupe (
  mesh_id             TEXT        NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  client_message_id   TEXT        NOT NULL,
  broker_message_id   TEXT        NOT NULL,  -- no FK: the message row may be pruned first
  request_fingerprint BYTEA       NOT NULL CHECK (octet_length(request_fingerprint) = 32),
  destination_kind    TEXT        NOT NULL CHECK (destination_kind IN ('topic', 'dm', 'queue')),
  destination_ref     TEXT        NOT NULL,
  first_seen_at       TIMESTAMPTZ NOT NULL DEFAULT NOW(),
  expires_at          TIMESTAMPTZ,           -- NULL ⇔ the mesh's dedupe_mode is 'permanent'
  history_available   BOOLEAN     NOT NULL DEFAULT TRUE,
  PRIMARY KEY (mesh_id, client_message_id)
);
CREATE INDEX client_message_dedupe_expires_idx
  ON client_message_dedupe(expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE message (
  id                  TEXT        PRIMARY KEY,          -- broker_message_id (ULID)
  mesh_id             TEXT        NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  client_message_id   TEXT        NOT NULL,             -- back-pointer, not unique
  request_fingerprint BYTEA       NOT NULL,             -- echoed on push
  sender_pubkey       TEXT        NOT NULL,
  target_spec         TEXT        NOT NULL,
  priority            TEXT        NOT NULL CHECK (priority IN ('now', 'next', 'low')),
  nonce               TEXT        NOT NULL,
  ciphertext          TEXT        NOT NULL,
  reply_to_id         TEXT,
  meta                TEXT,       -- RFC 8785 JSON exactly as sent (JSONB would reorder keys)
  created_at          TIMESTAMPTZ NOT NULL
);
CREATE INDEX message_created_idx ON message(created_at);

CREATE TABLE message_history (
  history_id TEXT        PRIMARY KEY,                   -- ULID
  mesh_id    TEXT        NOT NULL,
  message_id TEXT        NOT NULL UNIQUE REFERENCES message(id) ON DELETE CASCADE,
  created_at TIMESTAMPTZ NOT NULL
);

-- One row per intended recipient. A row is claimable while delivered_at is
-- NULL and its lease is absent or expired.
CREATE TABLE delivery_queue (
  id               BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  mesh_id          TEXT        NOT NULL,
  message_id       TEXT        NOT NULL REFERENCES message(id) ON DELETE CASCADE,
  recipient_pubkey TEXT        NOT NULL CHECK (recipient_pubkey ~ '^[0-9a-f]{64}$'),
  created_at       TIMESTAMPTZ NOT NULL,
  lease_expires_at TIMESTAMPTZ,
  attempts         INTEGER     NOT NULL DEFAULT 0,
  delivered_at     TIMESTAMPTZ,
  UNIQUE (message_id, recipient_pubkey)
);
CREATE INDEX delivery_queue_pending_idx
  ON delivery_queue(mesh_id, recipient_pubkey, id) WHERE delivered_at IS NULL;
CREATE INDEX delivery_queue_lease_idx
  ON delivery_queue(lease_expires_at) WHERE delivered_at IS NULL AND lease_expires_at IS NOT NULL;
