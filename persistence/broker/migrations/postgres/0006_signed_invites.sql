-- v1 signed invites (wire-protocol §3.7). Each mesh gets an owner key the
-- broker signs its invites with: an ed25519 key pair and the mesh's 32-byte
-- root key, made by the store the first time the mesh issues an invite
-- (SQL cannot make keys). The secret never leaves this table.
--
-- The invite table is rebuilt: an invite now has an id (for `broker invite
-- list` and `revoke`), a role, its number of uses and a revocation time.
-- The opaque invites of 0001 cannot be redeemed by a v1 join (their token
-- is no signed payload), so they are dropped: links made before this
-- migration stop working. token_hash is the SHA-256 of the v1 token, the
-- base64url payload the link carries.
--
-- A member keeps the role its invite granted. Keep in step with
-- ../sqlite/0006_signed_invites.sql.
CREATE TABLE mesh_owner_key (
  mesh_id          TEXT        PRIMARY KEY REFERENCES mesh(id) ON DELETE CASCADE,
  owner_pubkey     TEXT        NOT NULL CHECK (owner_pubkey ~ '^[0-9a-f]{64}$'),
  owner_secret_key BYTEA       NOT NULL CHECK (octet_length(owner_secret_key) = 32),  -- ed25519 seed
  root_key         BYTEA       NOT NULL CHECK (octet_length(root_key) = 32),
  created_at       TIMESTAMPTZ NOT NULL
);

DROP TABLE invite;
CREATE TABLE invite (
  id         TEXT        PRIMARY KEY,  -- ULID
  token_hash BYTEA       NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
  mesh_id    TEXT        NOT NULL REFERENCES mesh(id) ON DELETE CASCADE,
  role       TEXT        NOT NULL CHECK (role IN ('admin', 'member')),
  max_uses   INTEGER     NOT NULL CHECK (max_uses >= 1),
  uses_left  INTEGER     NOT NULL CHECK (uses_left >= 0 AND uses_left <= max_uses),
  expires_at TIMESTAMPTZ NOT NULL,
  revoked_at TIMESTAMPTZ,
  created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX invite_mesh_idx ON invite (mesh_id, created_at);

ALTER TABLE member ADD COLUMN role TEXT NOT NULL DEFAULT 'member' CHECK (role IN ('admin', 'member'));
