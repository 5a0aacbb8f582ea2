package persistence

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Agent mail on inbox.db: one row, a thread, acknowledgements, contact
// policies and the contact requests they hold (messages.go's contacts).

// ReceivedRow is one row by id, of mesh when set (a session's own): nil
// when there is none.
func (in *Inbox) ReceivedRow(tx *Tx, id, mesh string) (*InboxRow, error) {
	var row InboxRow
	err := tx.Get(&row, `SELECT `+inboxColumns+` FROM inbox WHERE id = ?1 AND (?2 = '' OR mesh = ?2)`, id, mesh)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read inbox row: %w", err)
	}
	return &row, nil
}

// MarkAcked stamps acked_at = now on row id unless it has one, and returns
// the row (nil: no such row).
func (in *Inbox) MarkAcked(tx *Tx, id string, now int64) (*InboxRow, error) {
	if _, err := tx.Exec(`UPDATE inbox SET acked_at = ? WHERE id = ? AND acked_at IS NULL`, now, id); err != nil {
		return nil, fmt.Errorf("mark inbox row acked: %w", err)
	}
	return in.ReceivedRow(tx, id, "")
}

// ThreadOf is the thread of the received message (mesh, clientMessageID):
// found false when the inbox has none, "" for a message of no thread.
func (in *Inbox) ThreadOf(tx *Tx, mesh, clientMessageID string) (thread string, found bool, err error) {
	return threadOf(tx, `SELECT coalesce(thread_id, '') FROM inbox WHERE mesh = ? AND client_message_id = ? LIMIT 1`,
		mesh, clientMessageID)
}

// ThreadOf is the thread of the sent message (mesh, clientMessageID).
func (o *Outbox) ThreadOf(tx *Tx, mesh, clientMessageID string) (thread string, found bool, err error) {
	return threadOf(tx, `SELECT coalesce(thread_id, '') FROM outbox WHERE mesh = ? AND client_message_id = ?`,
		mesh, clientMessageID)
}

func threadOf(tx *Tx, query, mesh, clientMessageID string) (string, bool, error) {
	var thread string
	err := tx.Get(&thread, query, mesh, clientMessageID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("look up a message's thread: %w", err)
	}
	return thread, true, nil
}

// admissionSQL reads a route's contact policy (open when it set none),
// its request TTL (the default when none) and whether a key is its
// contact.
const admissionSQL = `SELECT coalesce(p.policy, 'open'), coalesce(p.request_ttl_ms, ?3),
       EXISTS (SELECT 1 FROM contact c WHERE c.mesh = ?1 AND c.peer_pubkey = ?2)
  FROM (SELECT 1) LEFT JOIN contact_policy p ON p.mesh = ?1`

// Admit applies the contact policy of row's mesh to row, a received direct
// message: under auto a stranger becomes a contact; under contacts_only a
// stranger's message is held (its HeldUntil set) as a contact request;
// under block_all it is refused (refused true: not to be stored).
func (in *Inbox) Admit(tx *Tx, row *InboxRow) (refused bool, err error) {
	var policy string
	var ttl int64
	var known bool
	if err := tx.Prepared(in.admission).QueryRow(row.Mesh, row.SenderPubkey,
		messages.DefaultContactRequestTTL.Milliseconds()).Scan(&policy, &ttl, &known); err != nil {
		return false, fmt.Errorf("read contact policy: %w", err)
	}
	switch {
	case policy == messages.PolicyBlockAll:
		return true, nil
	case known:
	case policy == messages.PolicyAuto:
		return false, in.AddContact(tx, row.Mesh, row.SenderPubkey, row.SenderName, "auto", row.ReceivedAt)
	case policy == messages.PolicyContactsOnly:
		until := row.ReceivedAt + ttl
		row.HeldUntil = &until
	}
	return false, nil
}

// HeldUntil is when the stored copy of row (its mesh, id and sender) is
// held until: 0 when it is no longer held (its request was accepted).
func (in *Inbox) HeldUntil(tx *Tx, row *InboxRow) (int64, error) {
	var until sql.NullInt64
	err := tx.Get(&until, `SELECT held_until FROM inbox WHERE mesh = ? AND client_message_id = ? AND sender_pubkey = ?`,
		row.Mesh, row.ClientMessageID, row.SenderPubkey)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read a held message: %w", err)
	}
	return until.Int64, nil
}

// AddContact makes peer a contact of mesh (via sent, accepted or auto);
// one that is already keeps its record.
func (in *Inbox) AddContact(tx *Tx, mesh, peer, name, via string, now int64) error {
	if _, err := tx.Exec(`INSERT INTO contact (mesh, peer_pubkey, peer_name, via, added_at) VALUES (?, ?, ?, ?, ?)
	                      ON CONFLICT (mesh, peer_pubkey) DO NOTHING`, mesh, peer, name, via, now); err != nil {
		return fmt.Errorf("add contact: %w", err)
	}
	return nil
}

// SetPolicy sets mesh's contact policy; ttl 0 keeps its request TTL (the
// default for a route that had none).
func (in *Inbox) SetPolicy(tx *Tx, mesh, policy string, ttl time.Duration, now int64) error {
	if _, err := tx.Exec(`INSERT INTO contact_policy (mesh, policy, request_ttl_ms, updated_at)
	                      VALUES (?1, ?2, CASE WHEN ?3 > 0 THEN ?3 ELSE ?4 END, ?5)
	                      ON CONFLICT (mesh) DO UPDATE SET policy = ?2, updated_at = ?5,
	                        request_ttl_ms = CASE WHEN ?3 > 0 THEN ?3 ELSE request_ttl_ms END`,
		mesh, policy, ttl.Milliseconds(), messages.DefaultContactRequestTTL.Milliseconds(), now); err != nil {
		return fmt.Errorf("set contact policy: %w", err)
	}
	return nil
}

// Contacts is mesh's policy and contacts, the oldest first.
func (in *Inbox) Contacts(tx *Tx, mesh string) (*messages.Contacts, error) {
	out := &messages.Contacts{Mesh: mesh, Contacts: []messages.Contact{}}
	var ttl int64
	var known bool
	if err := tx.Prepared(in.admission).QueryRow(mesh, "", messages.DefaultContactRequestTTL.Milliseconds()).Scan(
		&out.Policy, &ttl, &known); err != nil {
		return nil, fmt.Errorf("read contact policy: %w", err)
	}
	out.RequestTTL = (time.Duration(ttl) * time.Millisecond).String()
	var rows []struct {
		Peer    string `db:"peer_pubkey"`
		Name    string `db:"peer_name"`
		Via     string `db:"via"`
		AddedAt int64  `db:"added_at"`
	}
	if err := tx.Select(&rows, `SELECT peer_pubkey, peer_name, via, added_at FROM contact WHERE mesh = ?
	                            ORDER BY added_at, peer_pubkey`, mesh); err != nil {
		return nil, fmt.Errorf("list contacts: %w", err)
	}
	for _, r := range rows {
		out.Contacts = append(out.Contacts, messages.Contact{Pubkey: r.Peer, Name: r.Name, Via: r.Via, AddedAt: isoTime(r.AddedAt)})
	}
	return out, nil
}

// Requests lists mesh's pending contact requests (of peer, when set) at
// now: the held messages not expired, by sender, oldest first.
func (in *Inbox) Requests(tx *Tx, mesh, peer string, now int64) ([]messages.ContactRequest, error) {
	var rows []InboxRow
	if err := tx.Select(&rows, `SELECT `+inboxColumns+` FROM inbox
	     WHERE mesh = ?1 AND held_until IS NOT NULL AND held_until > ?2 AND (?3 = '' OR sender_pubkey = ?3)
	     ORDER BY received_at, id`, mesh, now, peer); err != nil {
		return nil, fmt.Errorf("list contact requests: %w", err)
	}
	out := []messages.ContactRequest{}
	for i := range rows {
		r := &rows[i]
		k := slices.IndexFunc(out, func(c messages.ContactRequest) bool { return c.Pubkey == r.SenderPubkey })
		if k < 0 {
			out = append(out, messages.ContactRequest{Pubkey: r.SenderPubkey, Name: r.SenderName, Until: isoTime(*r.HeldUntil)})
			k = len(out) - 1
		}
		out[k].Messages = append(out[k].Messages, r.Item())
	}
	return out, nil
}

// Decide accepts or refuses peer's pending contact request to mesh at now
// and returns its messages: accepted, they land in the inbox and peer
// becomes a contact; refused, they are deleted.
func (in *Inbox) Decide(tx *Tx, mesh, peer string, accept bool, now int64) ([]InboxRow, error) {
	query := `DELETE FROM inbox`
	if accept {
		query = `UPDATE inbox SET held_until = NULL`
	}
	var rows []InboxRow
	if err := tx.Select(&rows, query+` WHERE mesh = ? AND sender_pubkey = ? AND held_until IS NOT NULL AND held_until > ?
	                                  RETURNING `+inboxColumns, mesh, peer, now); err != nil {
		return nil, fmt.Errorf("decide contact request: %w", err)
	}
	slices.SortFunc(rows, func(a, b InboxRow) int {
		if c := a.ReceivedAt - b.ReceivedAt; c != 0 {
			return int(min(max(c, -1), 1))
		}
		return strings.Compare(a.ID, b.ID)
	})
	if accept && len(rows) > 0 {
		if err := in.AddContact(tx, mesh, peer, rows[0].SenderName, "accepted", now); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// ExpiredRequests lists up to limit of mesh's messages held as contact
// requests whose time ran out at now or before, the longest expired first,
// and the earliest held_until still to come (0: none), when the route's
// inbox actor looks again.
func (in *Inbox) ExpiredRequests(tx *Tx, mesh string, now int64, limit int) ([]messages.ExpiredRequest, int64, error) {
	var out []messages.ExpiredRequest
	if err := tx.Select(&out, `SELECT id, client_message_id, sender_pubkey FROM inbox INDEXED BY inbox_held
		WHERE mesh = ?1 AND held_until IS NOT NULL AND held_until <= ?2 ORDER BY held_until, id LIMIT ?3 + 0`,
		mesh, now, limit); err != nil {
		return nil, 0, fmt.Errorf("list expired contact requests: %w", err)
	}
	var next sql.NullInt64
	if err := tx.Get(&next, `SELECT MIN(held_until) FROM inbox INDEXED BY inbox_held
		WHERE mesh = ?1 AND held_until IS NOT NULL AND held_until > ?2`, mesh, now); err != nil {
		return nil, 0, fmt.Errorf("list expired contact requests: %w", err)
	}
	return out, next.Int64, nil
}

// DropExpiredRequests deletes those of mesh's messages ids that are still
// held as contact requests expired at now (one accepted or refused
// meanwhile is left to that decision), and returns how many.
func (in *Inbox) DropExpiredRequests(tx *Tx, mesh string, ids []string, now int64) (int64, error) {
	idsJSON, err := json.Marshal(ids)
	if err != nil {
		return 0, fmt.Errorf("drop expired contact requests: %w", err)
	}
	n, err := affected(tx.Exec(`DELETE FROM inbox WHERE mesh = ?1 AND id IN (SELECT value FROM json_each(?2))
		AND held_until IS NOT NULL AND held_until <= ?3`, mesh, string(idsJSON), now))
	if err != nil {
		return 0, fmt.Errorf("drop expired contact requests: %w", err)
	}
	return n, nil
}

// PruneRequests deletes up to limit messages held as contact requests that
// expired before now, and returns how many.
func (in *Inbox) PruneRequests(tx *Tx, now int64, limit int) (int64, error) {
	n, err := affected(tx.Exec(`DELETE FROM inbox WHERE seq IN (SELECT seq FROM inbox INDEXED BY inbox_held
		WHERE held_until IS NOT NULL AND held_until <= ?1 LIMIT ?2 + 0)`, now, limit))
	if err != nil {
		return 0, fmt.Errorf("prune contact requests: %w", err)
	}
	return n, nil
}
