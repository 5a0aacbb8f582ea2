package persistence

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Inbox paging limits (spec §3.8).
const (
	DefaultInboxLimit = 100
	MaxInboxLimit     = 1000
)

// ErrBadCursor means an inbox cursor (InboxQuery.After) was not one List
// produced. The IPC layer answers 400 invalid_query.
var ErrBadCursor = errors.New("invalid inbox cursor")

// Inbox is inbox.db with its prepared statements: the inbox rows (spec
// §4.12) and the SSE event log (events.go).
type Inbox struct {
	*DB
	insert         *sqlx.Stmt
	admission      *sqlx.Stmt // a DM's contact policy and whether its sender is a contact
	appendEvent    *sqlx.Stmt
	eventsAfter    *sqlx.Stmt
	lastEvent      *sqlx.Stmt
	trimmedThrough *sqlx.Stmt
	// unindexed counts the rows inserted since the search index was last
	// caught up (IndexPending), as far as this process saw them.
	unindexed int
}

// NewInbox prepares the statements on db, a database opened by OpenInbox.
// Close on the result closes db too; on error db is left open for the
// caller to close.
func NewInbox(db *DB) (*Inbox, error) {
	ctx := context.Background()
	in := &Inbox{DB: db}
	for _, s := range []struct {
		dst   **sqlx.Stmt
		query string
	}{
		{&in.insert, `INSERT INTO inbox (id, client_message_id, broker_message_id, mesh, topic, sender_pubkey,
		                                  sender_name, body, meta, received_at, reply_to_id, recipient_pubkey, recipient_kind,
		                                  subject, thread_id, importance, ack_required, held_until, priority, sent_at)
		              VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		              ON CONFLICT(mesh, client_message_id, sender_pubkey) DO NOTHING`},
		{&in.admission, admissionSQL},
		{&in.appendEvent, `INSERT INTO events (name, data, created_at) VALUES (?, ?, ?)`},
		{&in.eventsAfter, `SELECT id, name, data, created_at FROM events WHERE id > ? ORDER BY id LIMIT ?`},
		{&in.lastEvent, `SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)`},
		{&in.trimmedThrough, `SELECT through FROM events_trimmed`},
	} {
		stmt, err := db.db.PreparexContext(ctx, s.query)
		if err != nil {
			in.closeStmts()
			return nil, fmt.Errorf("prepare inbox statement: %w", err)
		}
		*s.dst = stmt
	}
	return in, nil
}

func (in *Inbox) closeStmts() error {
	var errs []error
	for _, s := range []*sqlx.Stmt{in.insert, in.admission, in.appendEvent, in.eventsAfter, in.lastEvent, in.trimmedThrough} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

// Close releases the statements and the database.
func (in *Inbox) Close() error {
	return errors.Join(in.closeStmts(), in.DB.Close())
}

// InboxRow is one row of the inbox table (spec §4.12). Timestamps are Unix
// ms. Nil pointers are SQL NULLs.
type InboxRow struct {
	ID              string  `db:"id"`                // ULID, local row id
	ClientMessageID string  `db:"client_message_id"` // dedupe key; see InboxDedupeKey
	BrokerMessageID *string `db:"broker_message_id"`
	Mesh            string  `db:"mesh"`
	Topic           *string `db:"topic"` // nil for DMs
	SenderPubkey    string  `db:"sender_pubkey"`
	SenderName      string  `db:"sender_name"`
	Body            *string `db:"body"` // nil when decryption failed (A25)
	Meta            *string `db:"meta"` // JSON text
	ReceivedAt      int64   `db:"received_at"`
	ReplyToID       *string `db:"reply_to_id"`
	SeenAt          *int64  `db:"seen_at"`          // nil: unread
	RecipientPubkey *string `db:"recipient_pubkey"` // the key it reached
	RecipientKind   *string `db:"recipient_kind"`   // session | member
	Subject         *string `db:"subject"`
	ThreadID        *string `db:"thread_id"`
	Importance      *string `db:"importance"` // nil: normal
	AckRequired     bool    `db:"ack_required"`
	AckedAt         *int64  `db:"acked_at"`
	HeldUntil       *int64  `db:"held_until"` // held as a contact request until then
	Priority        *string `db:"priority"`   // the sender's: now, next or low
	SentAt          *string `db:"sent_at"`    // when the broker took it, as it wrote it
}

// inboxColumns are the columns of an InboxRow, as a select lists them.
const inboxColumns = `id, client_message_id, broker_message_id, mesh, topic, sender_pubkey, sender_name, body, meta,
	received_at, reply_to_id, seen_at, recipient_pubkey, recipient_kind, subject, thread_id, importance, ack_required,
	acked_at, held_until, priority, sent_at`

// InboxRowOf is the row that stores a received message.
func InboxRowOf(it *messages.InboxItem) *InboxRow {
	row := &InboxRow{ID: it.ID, ClientMessageID: it.ClientMessageID, BrokerMessageID: optional(it.BrokerMessageID),
		Mesh: it.Mesh, Topic: optional(it.Topic), SenderPubkey: it.SenderPubkey, SenderName: it.SenderName,
		Body: it.Body, ReceivedAt: it.ReceivedAtMs, ReplyToID: optional(it.ReplyToID),
		RecipientPubkey: optional(it.RecipientPubkey), RecipientKind: optional(it.RecipientKind),
		Subject: optional(it.Subject), ThreadID: optional(it.ThreadID), AckRequired: it.AckRequired,
		Priority: optional(it.Priority), SentAt: optional(it.SentAt)}
	if it.Importance != messages.ImportanceNormal {
		row.Importance = optional(it.Importance)
	}
	if len(it.Meta) > 0 {
		meta := string(it.Meta)
		row.Meta = &meta
	}
	return row
}

// Item renders the row for the API (GET /v1/inbox).
func (r *InboxRow) Item() messages.InboxItem {
	it := messages.InboxItem{ID: r.ID, ClientMessageID: r.ClientMessageID, BrokerMessageID: messages.Deref(r.BrokerMessageID),
		Mesh: r.Mesh, Kind: "dm", Topic: messages.NullString(messages.Deref(r.Topic)), SenderPubkey: r.SenderPubkey, SenderName: r.SenderName,
		Body: r.Body, ReceivedAt: time.UnixMilli(r.ReceivedAt).UTC().Format(time.RFC3339Nano), ReceivedAtMs: r.ReceivedAt,
		ReplyToID: messages.NullString(messages.Deref(r.ReplyToID)), RecipientPubkey: messages.Deref(r.RecipientPubkey),
		RecipientKind: messages.Deref(r.RecipientKind)}
	if r.SeenAt != nil {
		seen := time.UnixMilli(*r.SeenAt).UTC().Format(time.RFC3339Nano)
		it.SeenAt = &seen
	}
	if r.Topic != nil {
		it.Kind = "topic"
	}
	if r.Meta != nil {
		it.Meta = json.RawMessage(*r.Meta)
	}
	it.Subject, it.ThreadID, it.Importance = messages.Deref(r.Subject), messages.Deref(r.ThreadID), messages.Deref(r.Importance)
	it.AckRequired, it.AckedAt, it.HeldUntil = r.AckRequired, msTime(r.AckedAt), msTime(r.HeldUntil)
	it.Priority, it.SentAt = messages.Deref(r.Priority), messages.Deref(r.SentAt)
	return it
}

// msTime is a nullable Unix ms as RFC 3339, nil for NULL.
func msTime(ms *int64) *string {
	if ms == nil {
		return nil
	}
	s := time.UnixMilli(*ms).UTC().Format(time.RFC3339Nano)
	return &s
}

// optional is s as a nullable column: nil for "".
func optional[S ~string](s S) *string {
	if s == "" {
		return nil
	}
	v := string(s)
	return &v
}

// InboxDedupeKey is the inbox's client_message_id for a message (A25): the
// sender's id, or "broker:<broker_message_id>" for a legacy sender that
// gave none (never a random id, which would defeat dedupe). It returns ""
// when both are empty: such a message cannot be deduplicated.
func InboxDedupeKey(clientMessageID, brokerMessageID string) string {
	switch {
	case clientMessageID != "":
		return clientMessageID
	case brokerMessageID != "":
		return "broker:" + brokerMessageID
	}
	return ""
}

// Insert stores row unless a row with its mesh, sender and client_message_id
// exists (spec §4.12, §5 step 3; per mesh, migration 0003; per sender,
// 0007). inserted is true for a new row — only those fire SSE "message"
// and hooks; false means a dedupe no-op that changed nothing.
func (in *Inbox) Insert(tx *Tx, row *InboxRow) (inserted bool, err error) {
	if row.ID == "" || row.ClientMessageID == "" {
		return false, fmt.Errorf("insert inbox row: id and client_message_id are required (id %q, client_message_id %q)",
			row.ID, row.ClientMessageID)
	}
	n, err := affected(tx.Prepared(in.insert).Exec(row.ID, row.ClientMessageID, row.BrokerMessageID, row.Mesh, row.Topic,
		row.SenderPubkey, row.SenderName, row.Body, row.Meta, row.ReceivedAt, row.ReplyToID, row.RecipientPubkey, row.RecipientKind,
		row.Subject, row.ThreadID, row.Importance, row.AckRequired, row.HeldUntil, row.Priority, row.SentAt))
	if err != nil {
		return false, fmt.Errorf("insert inbox row %s: %w", row.ClientMessageID, err)
	}
	if n == 1 {
		if in.unindexed++; in.unindexed >= IndexEvery {
			if err := in.IndexPending(tx); err != nil {
				return false, err
			}
		}
	}
	return n == 1, nil
}

// InboxQuery selects one page of the inbox (spec §3.8). Zero values do not
// filter.
type InboxQuery struct {
	Since int64  // received_at >= Since (Unix ms)
	Topic string // exact topic
	From  string // exact sender_pubkey (name resolution is the caller's)
	Mesh  string // exact mesh
	Limit int    // DefaultInboxLimit when <= 0, at most MaxInboxLimit
	After string // cursor: the next of the previous page
	// UnreadOnly keeps the rows not seen yet.
	UnreadOnly bool
	// Thread keeps a thread's rows (thread_id, or the root's
	// client_message_id); Importance the rows of the importances it
	// lists, separated by commas ("normal", "high", "urgent"; "" does not
	// filter); Unacked the rows that asked for an acknowledgement not
	// given yet; ID the row of that id.
	Thread     string
	Importance string
	Unacked    bool
	ID         string
}

// List returns one page of inbox rows in ascending (received_at, id) order.
// next is the cursor of the following page (pass it as After with the same
// filters), "" on the last page. A cursor List did not produce gives an
// error wrapping ErrBadCursor.
func (in *Inbox) List(tx *Tx, q InboxQuery) (rows []InboxRow, next string, err error) {
	limit := q.Limit
	switch {
	case limit <= 0:
		limit = DefaultInboxLimit
	case limit > MaxInboxLimit:
		limit = MaxInboxLimit
	}
	where, args := q.filters()
	if q.After != "" {
		at, id, err := decodeInboxCursor(q.After)
		if err != nil {
			return nil, "", err
		}
		// The first term lets the received_at index bound the scan.
		where = append(where, "received_at >= ? AND (received_at > ? OR id > ?)")
		args = append(args, at, at, id)
	}
	query := `SELECT ` + inboxColumns + ` FROM inbox WHERE ` + strings.Join(where, " AND ")
	query += " ORDER BY received_at, id LIMIT ?"
	args = append(args, limit+1)
	if err := tx.Select(&rows, query, args...); err != nil {
		return nil, "", fmt.Errorf("list inbox: %w", err)
	}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		next = encodeInboxCursor(last.ReceivedAt, last.ID)
	}
	return rows, next, nil
}

// filters are the query's conditions and their arguments: never a
// message held as a contact request.
func (q *InboxQuery) filters() (where []string, args []any) {
	where = []string{"held_until IS NULL"}
	add := func(cond string, a ...any) { where, args = append(where, cond), append(args, a...) }
	if q.Since != 0 {
		add("received_at >= ?", q.Since)
	}
	if q.Topic != "" {
		add("topic = ?", q.Topic)
	}
	if q.From != "" {
		add("sender_pubkey = ?", q.From)
	}
	if q.Mesh != "" {
		add("mesh = ?", q.Mesh)
	}
	if q.UnreadOnly {
		add("seen_at IS NULL")
	}
	if q.Thread != "" {
		add("(thread_id = ? OR client_message_id = ?)", q.Thread, q.Thread)
	}
	if q.Importance != "" {
		var either []string
		for imp := range strings.SplitSeq(q.Importance, ",") {
			if imp == messages.ImportanceNormal {
				either = append(either, "importance IS NULL")
			} else {
				either, args = append(either, "importance = ?"), append(args, imp)
			}
		}
		where = append(where, "("+strings.Join(either, " OR ")+")")
	}
	if q.Unacked {
		add("ack_required = 1 AND acked_at IS NULL")
	}
	if q.ID != "" {
		add("id = ?", q.ID)
	}
	return where, args
}

// encodeInboxCursor makes the opaque keyset cursor: base64url("ms:id").
func encodeInboxCursor(receivedAt int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(receivedAt, 10) + ":" + id))
}

func decodeInboxCursor(c string) (int64, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	ms, id, ok := strings.Cut(string(raw), ":")
	if !ok || id == "" {
		return 0, "", fmt.Errorf("%w: malformed", ErrBadCursor)
	}
	at, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("%w: malformed time", ErrBadCursor)
	}
	return at, id, nil
}

// MarkSeen stamps seen_at = now on the rows of ids (of mesh, when set)
// not seen yet and returns how many it stamped.
func (in *Inbox) MarkSeen(tx *Tx, ids []string, mesh string, now int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	query, args, err := sqlx.In(`UPDATE inbox SET seen_at = ? WHERE seen_at IS NULL AND id IN (?)`, now, ids)
	if err != nil {
		return 0, err
	}
	if mesh != "" {
		query, args = query+" AND mesh = ?", append(args, mesh)
	}
	n, err := affected(tx.Exec(query, args...))
	if err != nil {
		return 0, fmt.Errorf("mark inbox rows seen: %w", err)
	}
	return n, nil
}

// InboxDeletion selects the rows DeleteRows removes: one row by ID, or
// those of Mesh received before Before (either may be zero), or — All — every row.
type InboxDeletion struct {
	ID     string
	Mesh   string
	Before int64 // Unix ms
	All    bool
}

// DeleteRows removes the rows d selects and returns how many. A deletion
// that selects nothing in particular (no ID, Mesh or Before) removes
// nothing unless All says so.
func (in *Inbox) DeleteRows(tx *Tx, d InboxDeletion) (int64, error) {
	var where []string
	var args []any
	if d.ID != "" {
		where, args = append(where, "id = ?"), append(args, d.ID)
	}
	if d.Mesh != "" {
		where, args = append(where, "mesh = ?"), append(args, d.Mesh)
	}
	if d.Before != 0 {
		where, args = append(where, "received_at < ?"), append(args, d.Before)
	}
	query := "DELETE FROM inbox"
	switch {
	case len(where) > 0:
		query += " WHERE " + strings.Join(where, " AND ")
	case !d.All:
		return 0, errors.New("delete inbox rows: no filter and not all")
	}
	n, err := affected(tx.Exec(query, args...))
	if err != nil {
		return 0, fmt.Errorf("delete inbox rows: %w", err)
	}
	return n, nil
}

// Count is the number of inbox rows.
func (in *Inbox) Count(tx *Tx) (int64, error) {
	var n int64
	if err := tx.Get(&n, "SELECT COUNT(*) FROM inbox"); err != nil {
		return 0, fmt.Errorf("count inbox rows: %w", err)
	}
	return n, nil
}

// Prune deletes up to limit of the rows received before olderThan (Unix
// ms; [inbox] retention_days), oldest first, and returns how many it
// deleted.
func (in *Inbox) Prune(tx *Tx, olderThan int64, limit int) (int64, error) {
	n, err := affected(tx.Exec(`DELETE FROM inbox WHERE id IN
		(SELECT id FROM inbox WHERE received_at < ?1 ORDER BY received_at LIMIT ?2 + 0)`, olderThan, limit))
	if err != nil {
		return 0, fmt.Errorf("prune inbox: %w", err)
	}
	return n, nil
}
