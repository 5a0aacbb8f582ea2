package broker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Claim asks for undelivered rows of some recipients.
type Claim struct {
	MeshID           string
	RecipientPubkeys []string      // every key the connection receives for (member and session pubkey)
	Lease            time.Duration // how long the rows stay invisible to other claims
	Limit            int
	// OnlyNow restricts the claim to priority "now" (a recipient whose
	// status is working or dnd; wire protocol §2.4 step 8).
	OnlyNow bool
}

// Delivery is one claimed delivery_queue row with everything a `push`
// frame needs.
type Delivery struct {
	DeliveryID         int64
	MeshID             string
	RecipientPubkey    string
	BrokerMessageID    string // the push's messageId; what client_ack names
	ClientMessageID    string
	RequestFingerprint messages.Fingerprint
	SenderPubkey       string
	// SenderName is the sender's display name as the accept stored it
	// (its session's, else its member's: what the live push carried);
	// for a message accepted before the broker stored names, as the mesh
	// knows it now ("" when neither is known).
	SenderName     string
	TargetSpec     string
	Priority       string
	Nonce          string
	Ciphertext     string
	ReplyToID      string // "" when not a reply
	Meta           []byte // nil when absent
	CreatedAt      time.Time
	HistoryID      string
	Attempts       int // claims so far, this one included
	LeaseExpiresAt time.Time
}

// ClaimDeliveries leases up to c.Limit undelivered rows of the recipients
// whose lease is absent or expired, oldest first: each gets
// lease_expires_at = now + c.Lease and attempts + 1. On PostgreSQL the rows
// are locked with SKIP LOCKED, so two replicas never claim the same row.
func (s *Store) ClaimDeliveries(ctx context.Context, c Claim) ([]Delivery, error) {
	if c.Limit <= 0 || c.Lease <= 0 || len(c.RecipientPubkeys) == 0 {
		return nil, nil
	}
	now := s.clock()
	leaseUntil := now.Add(c.Lease).Truncate(time.Millisecond)
	var out []Delivery
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var ids []int64
		err := s.txSelect(ctx, tx, &ids, s.d.rewrite(`UPDATE delivery_queue
			   SET lease_expires_at = ?, attempts = attempts + 1
			 WHERE id IN (SELECT d.id FROM delivery_queue d JOIN message m ON m.id = d.message_id
			               WHERE d.mesh_id = ? AND d.recipient_pubkey IN (SELECT value FROM EACH(?))
			                 AND d.delivered_at IS NULL
			                 AND (d.lease_expires_at IS NULL OR d.lease_expires_at <= ?)
			                 AND (? = FALSE OR m.priority = 'now')
			               ORDER BY d.id LIMIT ? /*SKIP LOCKED*/)
			RETURNING id`),
			s.d.time(leaseUntil), c.MeshID, jsonArray(c.RecipientPubkeys), s.d.time(now), c.OnlyNow, c.Limit)
		if err != nil || len(ids) == 0 {
			return err
		}
		out, err = s.readDeliveries(ctx, tx, ids)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	return out, nil
}

func (s *Store) readDeliveries(ctx context.Context, tx *sqlx.Tx, ids []int64) ([]Delivery, error) {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = strconv.FormatInt(id, 10)
	}
	rows, err := s.txQuery(ctx, tx, s.d.rewrite(`SELECT d.id, d.mesh_id, d.recipient_pubkey, d.attempts, d.lease_expires_at,
		       m.id, m.client_message_id, m.request_fingerprint, m.sender_pubkey, m.target_spec, m.priority,
		       m.nonce, m.ciphertext, m.reply_to_id, m.meta, m.created_at, h.history_id,
		       COALESCE(m.sender_name,
		                (SELECT NULLIF(ss.display_name, '') FROM mesh_session ss
		                  WHERE ss.mesh_id = d.mesh_id AND ss.session_pubkey = m.sender_pubkey),
		                (SELECT mb.display_name FROM member mb WHERE mb.mesh_id = d.mesh_id AND mb.pubkey = m.sender_pubkey), '')
		  FROM delivery_queue d JOIN message m ON m.id = d.message_id JOIN message_history h ON h.message_id = m.id
		 WHERE d.id IN (SELECT CAST(value AS BIGINT) FROM EACH(?))
		 ORDER BY d.id`), jsonArray(keys))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]Delivery, 0, len(ids))
	for rows.Next() {
		var d Delivery
		var fp []byte
		var replyTo, meta sql.NullString
		if err := rows.Scan(&d.DeliveryID, &d.MeshID, &d.RecipientPubkey, &d.Attempts, (*dbTime)(&d.LeaseExpiresAt),
			&d.BrokerMessageID, &d.ClientMessageID, &fp, &d.SenderPubkey, &d.TargetSpec, &d.Priority,
			&d.Nonce, &d.Ciphertext, &replyTo, &meta, (*dbTime)(&d.CreatedAt), &d.HistoryID, &d.SenderName); err != nil {
			return nil, err
		}
		copy(d.RequestFingerprint[:], fp)
		d.ReplyToID = replyTo.String
		if meta.Valid {
			d.Meta = []byte(meta.String)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// Ack is one client_ack: the message named by BrokerMessageID or
// ClientMessageID ("" for the one not given), received by a connection
// that receives for RecipientPubkeys.
type Ack struct {
	MeshID           string
	RecipientPubkeys []string
	ClientMessageID  string
	BrokerMessageID  string
}

// AckDeliveries marks delivered, in one transaction, the rows the acks
// name. Acking is idempotent; it returns how many rows were marked now.
// Batch acks like accepts. On SQLite the transaction commits without an
// fsync: losing it in a power cut means the messages are pushed again, and
// receivers dedupe them.
func (s *Store) AckDeliveries(ctx context.Context, acks []Ack) (int64, error) {
	defer s.prepareWanted(ctx)
	tx, done, err := s.beginRelaxed(ctx)
	if err != nil {
		return 0, fmt.Errorf("ack deliveries: %w", err)
	}
	defer done()
	n, err := s.ack(ctx, tx, acks)
	if err != nil {
		_ = tx.Rollback()
		return 0, fmt.Errorf("ack deliveries: %w", err)
	}
	if err := s.commit(tx); err != nil {
		return 0, fmt.Errorf("ack deliveries: %w", err)
	}
	return n, nil
}

// ack marks delivered the rows the acks name, inside tx, and returns how
// many it marked now.
//
// The push named the message (its messageId), and an ack that names it is
// a lookup by message_id, never a scan of the recipient's queue. An ack
// with only the client's id cannot say whose id it means (ids are per
// sender): it marks the recipients' pushed (leased) rows whose message has
// that id — one, unless two senders' messages with one id are out to them
// at once, when it marks both (upstream's rule; a client that wants exact
// acks names the message, as ours does). A row never pushed is left.
func (s *Store) ack(ctx context.Context, tx *sqlx.Tx, acks []Ack) (int64, error) {
	var total int64
	// By (message_id, recipient_pubkey), the row's unique key: SQLite's
	// planner would otherwise walk every undelivered row of the recipient
	// (delivery_queue_pending_idx) for each ack, a backlog's worth.
	byMessage := s.d.rewrite(`UPDATE delivery_queue /*INDEXED BY delivery_queue_message*/ SET delivered_at = ?
		 WHERE message_id = ? AND mesh_id = ? AND delivered_at IS NULL
		   AND recipient_pubkey IN (SELECT value FROM EACH(?))`)
	byClientID := s.d.rewrite(`UPDATE delivery_queue SET delivered_at = ?
		 WHERE id IN (SELECT d.id FROM delivery_queue d JOIN message m ON m.id = d.message_id
		               WHERE d.mesh_id = ? AND d.recipient_pubkey IN (SELECT value FROM EACH(?))
		                 AND d.delivered_at IS NULL AND d.lease_expires_at IS NOT NULL
		                 AND m.client_message_id = ?)`)
	for _, a := range acks {
		var res sql.Result
		var err error
		switch {
		case a.BrokerMessageID != "":
			res, err = s.txExec(ctx, tx, byMessage, s.d.time(s.clock()), a.BrokerMessageID, a.MeshID, jsonArray(a.RecipientPubkeys))
		case a.ClientMessageID != "":
			res, err = s.txExec(ctx, tx, byClientID, s.d.time(s.clock()), a.MeshID, jsonArray(a.RecipientPubkeys), a.ClientMessageID)
		default:
			continue
		}
		if err != nil {
			return 0, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// Recipient names one recipient in one mesh.
type Recipient struct {
	MeshID string
	Pubkey string
}

// ExpiredLeases returns the recipients that have undelivered rows whose
// lease expired in (after, until]: the broker's redelivery timer pushes to
// those it has connected. Rows that were never claimed are not reported;
// they are claimed when their recipient connects.
func (s *Store) ExpiredLeases(ctx context.Context, after, until time.Time) ([]Recipient, error) {
	var rows []struct {
		MeshID string `db:"mesh_id"`
		Pubkey string `db:"recipient_pubkey"`
	}
	err := s.rdb.SelectContext(ctx, &rows, s.d.rewrite(`SELECT DISTINCT mesh_id, recipient_pubkey FROM delivery_queue
		 WHERE delivered_at IS NULL AND lease_expires_at IS NOT NULL AND lease_expires_at > ? AND lease_expires_at <= ?
		 ORDER BY mesh_id, recipient_pubkey`), s.d.time(after), s.d.time(until))
	if err != nil {
		return nil, fmt.Errorf("find expired leases: %w", err)
	}
	out := make([]Recipient, len(rows))
	for i, r := range rows {
		out[i] = Recipient{MeshID: r.MeshID, Pubkey: r.Pubkey}
	}
	return out, nil
}

// Waiting is a recipient with deliveries no connection claimed in time.
// Now reports whether one of them has priority "now": a busy recipient
// (working, dnd) takes only those.
type Waiting struct {
	Recipient
	Now bool
}

// WaitingRecipients returns the recipients with undelivered rows that
// became claimable in (after, until] and are claimable still: rows created
// unleased (for a recipient not pushed to at the accept) and rows whose
// lease ran out or was released. until is in the past, so nothing is
// leased past it. With until a poll interval back, these are the rows whose
// notification a replica missed — or whose recipient is offline, which the
// caller tells apart by its own connections. The two range scans follow
// delivery_queue_waiting_idx and delivery_queue_lease_idx: the cost is the
// rows of the window, not the queue's backlog.
func (s *Store) WaitingRecipients(ctx context.Context, after, until time.Time) ([]Waiting, error) {
	var rows []struct {
		MeshID string `db:"mesh_id"`
		Pubkey string `db:"recipient_pubkey"`
		Now    bool   `db:"now"`
	}
	err := s.rdb.SelectContext(ctx, &rows, s.d.rewrite(`SELECT d.mesh_id, d.recipient_pubkey,
		       MAX(CASE WHEN m.priority = 'now' THEN 1 ELSE 0 END) = 1 AS now
		  FROM (SELECT mesh_id, recipient_pubkey, message_id FROM delivery_queue
		         WHERE delivered_at IS NULL AND lease_expires_at IS NULL AND created_at > ? AND created_at <= ?
		        UNION ALL
		        SELECT mesh_id, recipient_pubkey, message_id FROM delivery_queue
		         WHERE delivered_at IS NULL AND lease_expires_at > ? AND lease_expires_at <= ?) d
		  JOIN message m ON m.id = d.message_id
		 GROUP BY d.mesh_id, d.recipient_pubkey
		 ORDER BY d.mesh_id, d.recipient_pubkey`),
		s.d.time(after), s.d.time(until), s.d.time(after), s.d.time(until))
	if err != nil {
		return nil, fmt.Errorf("find waiting recipients: %w", err)
	}
	out := make([]Waiting, len(rows))
	for i, r := range rows {
		out[i] = Waiting{Recipient: Recipient{MeshID: r.MeshID, Pubkey: r.Pubkey}, Now: r.Now}
	}
	return out, nil
}

// NextLeaseExpiry returns the earliest lease on an undelivered row that
// expires after t, and false when there is none: when the redelivery timer
// should next wake.
func (s *Store) NextLeaseExpiry(ctx context.Context, after time.Time) (time.Time, bool, error) {
	var next *time.Time
	err := s.rdb.QueryRowxContext(ctx, s.d.rewrite(`SELECT MIN(lease_expires_at) FROM delivery_queue
		 WHERE delivered_at IS NULL AND lease_expires_at IS NOT NULL AND lease_expires_at > ?`),
		s.d.time(after)).Scan(nullTime{&next})
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, fmt.Errorf("next lease expiry: %w", err)
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return *next, true, nil
}

// ReleaseRecipientLeases ends now the live leases on the undelivered rows
// of these recipients in one mesh: the connection they were pushed to has closed,
// so no ack will come for them from there. The recipients' next drain — a
// connection still live, or the next hello — pushes them again at once,
// not when the lease runs out. A lease held for another live connection of
// the same recipients is freed too; that push is repeated and the receiver
// dedupes it. On PostgreSQL the same transaction NOTIFYs the recipients
// when it freed anything, so that their connections at every replica
// (this one's included) drain. A lease ended is set to now, not cleared:
// the row stays marked as pushed, and WaitingRecipients finds it by when it
// became claimable again should the notification be missed.
func (s *Store) ReleaseRecipientLeases(ctx context.Context, meshID string, pubkeys []string) (int64, error) {
	var n int64
	now := s.d.time(s.clock())
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		res, err := s.txExec(ctx, tx, s.d.rewrite(`UPDATE delivery_queue SET lease_expires_at = ?
			 WHERE mesh_id = ? AND recipient_pubkey IN (SELECT value FROM EACH(?))
			   AND delivered_at IS NULL AND lease_expires_at > ?`), now, meshID, jsonArray(pubkeys), now)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		recipients := make([]Recipient, len(pubkeys))
		for i, pk := range pubkeys {
			recipients[i] = Recipient{MeshID: meshID, Pubkey: pk}
		}
		return s.notify(ctx, tx, recipients)
	})
	if err != nil {
		return 0, fmt.Errorf("release recipient leases: %w", err)
	}
	return n, nil
}

// ReleaseLeases frees every lease on an undelivered row: at the start of
// the only broker of a SQLite database, the leases left by its previous
// run belong to pushes that died with it, and the recipients should not
// wait for them to run out. (Replicas on PostgreSQL must not: another
// replica's leases are live.)
func (s *Store) ReleaseLeases(ctx context.Context) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.d.rewrite(
		`UPDATE delivery_queue SET lease_expires_at = NULL WHERE delivered_at IS NULL AND lease_expires_at IS NOT NULL`))
	if err != nil {
		return 0, fmt.Errorf("release leases: %w", err)
	}
	return res.RowsAffected()
}
