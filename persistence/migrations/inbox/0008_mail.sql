-- Agent mail on the recipient's side (issue 20).
--
-- The table is rebuilt with an integer key, seq, for the full-text index
-- to point at (an external-content FTS5 table needs a stable integer
-- rowid; an implicit rowid may change at a VACUUM). Every column and index
-- of 0007 is kept, the dedupe key reordered (mesh, client_message_id,
-- sender_pubkey) so that a message is found by its mesh and id alone (a
-- reply's thread, a thread's root), and the mail header's columns added:
-- subject, thread_id, importance (NULL: normal), ack_required, acked_at
-- (when this recipient acknowledged it, Unix ms) and held_until (a message
-- a contact policy holds as a contact request, until then; NULL: in the
-- inbox).
CREATE TABLE inbox_new (
  seq                 INTEGER PRIMARY KEY,
  id                  TEXT NOT NULL UNIQUE,
  client_message_id   TEXT NOT NULL,
  broker_message_id   TEXT,
  mesh                TEXT NOT NULL,
  topic               TEXT,
  sender_pubkey       TEXT NOT NULL,
  sender_name         TEXT NOT NULL,
  body                TEXT,
  meta                TEXT,
  received_at         INTEGER NOT NULL,
  reply_to_id         TEXT,
  seen_at             INTEGER,
  recipient_pubkey    TEXT,
  recipient_kind      TEXT,
  subject             TEXT,
  thread_id           TEXT,
  importance          TEXT CHECK (importance IS NULL OR importance = 'high' OR importance = 'urgent'),
  ack_required        INTEGER NOT NULL DEFAULT 0 CHECK (ack_required = 0 OR ack_required = 1),
  acked_at            INTEGER,
  held_until          INTEGER,
  UNIQUE (mesh, client_message_id, sender_pubkey)
);
INSERT INTO inbox_new (id, client_message_id, broker_message_id, mesh, topic, sender_pubkey, sender_name, body, meta,
                       received_at, reply_to_id, seen_at, recipient_pubkey, recipient_kind)
  SELECT id, client_message_id, broker_message_id, mesh, topic, sender_pubkey, sender_name, body, meta, received_at,
         reply_to_id, seen_at, recipient_pubkey, recipient_kind
    FROM inbox ORDER BY received_at, id;
DROP TABLE inbox;
ALTER TABLE inbox_new RENAME TO inbox;
CREATE INDEX inbox_received_at ON inbox(received_at);
CREATE INDEX inbox_topic ON inbox(topic) WHERE topic IS NOT NULL;
CREATE INDEX inbox_sender ON inbox(sender_pubkey);
CREATE INDEX inbox_unseen ON inbox(mesh, received_at) WHERE seen_at IS NULL;
CREATE INDEX inbox_thread ON inbox(thread_id) WHERE thread_id IS NOT NULL;
CREATE INDEX inbox_unacked ON inbox(mesh, received_at) WHERE ack_required = 1 AND acked_at IS NULL;
CREATE INDEX inbox_held ON inbox(mesh, sender_pubkey, held_until) WHERE held_until IS NOT NULL;

-- Search (GET /v1/inbox/search): an external-content FTS5 index of the
-- subject and the body — the plaintext /v1/inbox already shows — kept in
-- step by the triggers, with the porter stemmer over unicode61 as the
-- broker's memory search uses.
CREATE VIRTUAL TABLE inbox_fts USING fts5(subject, body, content = 'inbox', content_rowid = 'seq',
  tokenize = 'porter unicode61');
INSERT INTO inbox_fts (inbox_fts) VALUES ('rebuild');
CREATE TRIGGER inbox_fts_insert AFTER INSERT ON inbox BEGIN
  INSERT INTO inbox_fts (rowid, subject, body) VALUES (new.seq, new.subject, new.body);
END;
CREATE TRIGGER inbox_fts_delete AFTER DELETE ON inbox BEGIN
  INSERT INTO inbox_fts (inbox_fts, rowid, subject, body) VALUES ('delete', old.seq, old.subject, old.body);
END;
CREATE TRIGGER inbox_fts_update AFTER UPDATE OF subject, body ON inbox BEGIN
  INSERT INTO inbox_fts (inbox_fts, rowid, subject, body) VALUES ('delete', old.seq, old.subject, old.body);
  INSERT INTO inbox_fts (rowid, subject, body) VALUES (new.seq, new.subject, new.body);
END;

-- Contact policy (per route: a membership's slug or a session's route):
-- open (the default, no row), auto, contacts_only or block_all; under
-- contacts_only a stranger's direct message is held as a contact request
-- for request_ttl_ms.
CREATE TABLE contact_policy (
  mesh           TEXT    PRIMARY KEY,
  policy         TEXT    NOT NULL CHECK (policy = 'open' OR policy = 'auto' OR policy = 'contacts_only' OR policy = 'block_all'),
  request_ttl_ms INTEGER NOT NULL CHECK (request_ttl_ms > 0),
  updated_at     INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- A route's contacts: the keys it wrote a direct message to (via 'sent'),
-- accepted a contact request of ('accepted'), or let in under auto
-- ('auto').
CREATE TABLE contact (
  mesh        TEXT    NOT NULL,
  peer_pubkey TEXT    NOT NULL,
  peer_name   TEXT    NOT NULL,
  via         TEXT    NOT NULL CHECK (via = 'sent' OR via = 'accepted' OR via = 'auto'),
  added_at    INTEGER NOT NULL,
  PRIMARY KEY (mesh, peer_pubkey)
) STRICT, WITHOUT ROWID;
