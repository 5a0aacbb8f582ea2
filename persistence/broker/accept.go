package broker

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Destination kinds of the dedupe row (spec §4.3).
const (
	KindTopic = "topic"
	KindDM    = "dm"
	KindQueue = "queue"
)

// Rejection codes of the accept path, besides the messages.Code* ones it
// reuses for field validation.
const (
	CodeUnknownRecipient   = "unknown_recipient"
	CodeUnknownMesh        = "unknown_mesh"
	CodeInvalidDestination = "invalid_destination"
	CodeInvalidSender      = "invalid_sender"
)

// AcceptRequest is one `send` that passed B0 and B1 in the WebSocket layer.
type AcceptRequest struct {
	MeshID             string
	ClientMessageID    string
	RequestFingerprint messages.Fingerprint // as sent by the client; compared byte for byte
	DestinationKind    string               // KindTopic, KindDM or KindQueue
	DestinationRef     string               // topic name, recipient pubkey hex, queue id
	// SenderPubkey is the pubkey the push will carry as senderPubkey, and
	// the sender the id belongs to: the dedupe key is (MeshID,
	// SenderPubkey, ClientMessageID).
	SenderPubkey string
	TargetSpec   string
	Priority     string // now, next or low
	Nonce        string // base64, stored and pushed as sent
	Ciphertext   string // base64, stored and pushed as sent
	ReplyToID    string // "" when not a reply
	Meta         []byte // JSON object as sent, nil when absent
	// SenderName is the sender's display name as its connection knows it
	// (its session's, else its member's): stored with the message, it
	// names the message's drained pushes and its topic history as the live
	// push names it.
	SenderName string
	// Recipients are the pubkeys (64 lowercase hex, distinct: a repeated
	// key fails the request) that get a delivery_queue row, resolved by the
	// WebSocket layer. For a DM every recipient must be an active member of
	// the mesh or a session of one, and there must be one (the B2 check).
	Recipients []string
	// SessionMembers maps a recipient that is a session key to the member
	// whose attestation it holds, for the sessions the WebSocket layer
	// knows (connected to this broker; it verified the attestation at the
	// session's hello): the B2 check holds a DM to such a key to that
	// member being active. A key in neither this map nor the members is
	// looked up among the sessions of every replica (mesh_session).
	SessionMembers map[string]string
	// Online are those of Recipients the broker pushes to right after the
	// commit: their rows are created leased for Lease (attempts 1), as if
	// claimed, which saves a claim transaction per push. The other rows
	// wait for ClaimDeliveries (an offline member's when it connects).
	Online []string
	Lease  time.Duration
}

// Outcome is which answer of spec §4.9.2 an accept got.
type Outcome int

// Outcomes.
const (
	Created   Outcome = iota + 1 // 201: committed with a new broker_message_id
	Duplicate                    // 200: same id, same fingerprint: the original message
	Conflict                     // 409 idempotency_key_reused: same id, other fingerprint
	Rejected                     // 4xx: Err is a *messages.Error; nothing stored, the id stays free
	Failed                       // 5xx: Err is the cause; nothing stored; retry with the same id
)

// AcceptResult is the answer to one AcceptRequest.
type AcceptResult struct {
	Outcome                 Outcome
	BrokerMessageID         string    // Created, Duplicate
	HistoryID               string    // Created; Duplicate while the history row exists
	HistoryAvailable        bool      // Created, Duplicate (false once the message was pruned)
	FirstSeenAt             time.Time // Created, Duplicate
	BrokerFingerprintPrefix string    // Conflict: the stored fingerprint's first 8 bytes, 16 hex
	Err                     error     // Rejected, Failed
}

// Status is the HTTP-style status of the result (spec §4.9.2).
func (r *AcceptResult) Status() int {
	switch r.Outcome {
	case Created:
		return http.StatusCreated
	case Duplicate:
		return http.StatusOK
	case Conflict:
		return http.StatusConflict
	case Rejected:
		var e *messages.Error
		if errors.As(r.Err, &e) {
			return e.Status
		}
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// DedupeRow is one row of client_message_dedupe plus the history_id of its
// message while that exists.
type DedupeRow struct {
	MeshID string
	// SenderPubkey is the sender the id belongs to; "" for a row from
	// before migration 0005 whose message was already gone, which answers
	// its id for every sender of the mesh.
	SenderPubkey       string
	ClientMessageID    string
	BrokerMessageID    string
	RequestFingerprint messages.Fingerprint
	DestinationKind    string
	DestinationRef     string
	FirstSeenAt        time.Time
	ExpiresAt          *time.Time // nil: permanent
	HistoryAvailable   bool
	HistoryID          string // "" once the history row is gone
}

// Answer is the answer to a request carrying fp for this row's id:
// Duplicate when the fingerprints are equal byte for byte, else Conflict.
func (r *DedupeRow) Answer(fp messages.Fingerprint) AcceptResult {
	if r.RequestFingerprint != fp {
		return AcceptResult{Outcome: Conflict, BrokerFingerprintPrefix: r.RequestFingerprint.Prefix()}
	}
	return AcceptResult{Outcome: Duplicate, BrokerMessageID: r.BrokerMessageID, HistoryID: r.HistoryID,
		HistoryAvailable: r.HistoryAvailable, FirstSeenAt: r.FirstSeenAt}
}

// dedupeSelect reads dedupe rows with the history_id of their message.
const dedupeSelect = `SELECT d.mesh_id, d.sender_pubkey, d.client_message_id, d.broker_message_id, d.request_fingerprint,
	       d.destination_kind, d.destination_ref, d.first_seen_at, d.expires_at, d.history_available, h.history_id
	  FROM client_message_dedupe d LEFT JOIN message_history h ON h.message_id = d.broker_message_id`

func scanDedupe(row interface{ Scan(...any) error }) (*DedupeRow, error) {
	var r DedupeRow
	var fp []byte
	var historyID sql.NullString
	err := row.Scan(&r.MeshID, &r.SenderPubkey, &r.ClientMessageID, &r.BrokerMessageID, &fp, &r.DestinationKind, &r.DestinationRef,
		(*dbTime)(&r.FirstSeenAt), nullTime{&r.ExpiresAt}, &r.HistoryAvailable, &historyID)
	if err != nil {
		return nil, err
	}
	if len(fp) != len(r.RequestFingerprint) {
		return nil, fmt.Errorf("stored request_fingerprint has %d bytes", len(fp))
	}
	copy(r.RequestFingerprint[:], fp)
	r.HistoryID = historyID.String
	return &r, nil
}

// LookupDedupe is the B0 fast path: a plain, non-locking primary-key read
// of the dedupe row of this sender's id (or of the id's row of unknown
// sender, from before migration 0005). It returns nil, nil when the sender
// never had the id accepted.
func (s *Store) LookupDedupe(ctx context.Context, meshID, senderPubkey, clientMessageID string) (*DedupeRow, error) {
	row, err := scanDedupe(s.lookup.QueryRowxContext(ctx, meshID, senderPubkey, clientMessageID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up client_message_id: %w", err)
	}
	return row, nil
}

// AcceptBatch runs B2 and B3 of spec §4.9.4 for every request in one
// transaction (group commit) and returns one result per request, in order.
// A rejected or failed request leaves nothing behind and does not disturb
// its neighbours; two requests with the same id behave like two sequential
// requests. If the transaction itself fails, every result is Failed and
// nothing is stored.
//
// The batch first runs set-wise: a few multi-row statements for all
// requests, which write nothing for a request they do not create. Should
// one of them fail (a constraint violation, a deadlock), or should two
// requests share a key (mesh, sender, id), the batch runs again one request
// per SAVEPOINT, so that only the culprit fails. Requests are applied in
// (mesh_id, sender_pubkey, client_message_id) order, stable, so concurrent
// batches never wait on each other's keys in a cycle.
//
// On SQLite the commit skips its fsync (as an ack's does): the batch is
// visible, and safe from a crash of the process, when AcceptBatch returns,
// and durable once SyncWAL has returned, which the caller runs before it
// tells a sender that its message is accepted. Pushing the messages at
// once is safe: a recipient dedupes by (sender, client_message_id), so a
// message that a power cut takes back, sent again by its sender who never
// heard of it, is stored once.
func (s *Store) AcceptBatch(ctx context.Context, reqs []*AcceptRequest) []AcceptResult {
	b := &batch{reqs: reqs, results: make([]AcceptResult, len(reqs)), order: lockOrder(reqs), now: s.clock()}
	if len(reqs) == 0 {
		return b.results
	}
	defer s.prepareWanted(ctx)
	tx, done, err := s.beginRelaxed(ctx)
	if err != nil {
		return failAll(b.results, err)
	}
	if b.distinctKeys() {
		err := s.accept(ctx, tx, b, b.order)
		if err == nil {
			defer done()
			return s.finish(ctx, tx, b)
		}
		s.log.Warn("accept_batch_retry_per_request", "requests", len(reqs), "err", err)
		_ = tx.Rollback() // PostgreSQL has aborted it already
		done()
		if tx, done, err = s.beginRelaxed(ctx); err != nil {
			return failAll(b.results, err)
		}
		clear(b.results)
	}
	defer done()
	for _, i := range b.order {
		if err := s.acceptOne(ctx, tx, b, i); err != nil {
			_ = tx.Rollback() // the savepoint error is the one to report
			return failAll(b.results, err)
		}
	}
	return s.finish(ctx, tx, b)
}

// batch is one AcceptBatch call.
type batch struct {
	reqs    []*AcceptRequest
	results []AcceptResult
	order   []int // indexes of reqs in lock order
	now     time.Time
}

func (b *batch) distinctKeys() bool {
	for k := 1; k < len(b.order); k++ {
		if b.reqs[b.order[k-1]].key() == b.reqs[b.order[k]].key() {
			return false
		}
	}
	return true
}

func lockOrder(reqs []*AcceptRequest) []int {
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := strings.Compare(reqs[a].MeshID, reqs[b].MeshID); c != 0 {
			return c
		}
		if c := strings.Compare(reqs[a].SenderPubkey, reqs[b].SenderPubkey); c != 0 {
			return c
		}
		return strings.Compare(reqs[a].ClientMessageID, reqs[b].ClientMessageID)
	})
	return order
}

// acceptOne runs request i alone inside a savepoint; if it fails, its
// writes are rolled back and its result is Failed. The error is for the
// batch: the savepoint machinery failed and the transaction is unusable.
func (s *Store) acceptOne(ctx context.Context, tx *sqlx.Tx, b *batch, i int) error {
	if _, err := s.txExec(ctx, tx, "SAVEPOINT accept"); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	if err := s.accept(ctx, tx, b, []int{i}); err != nil {
		b.results[i] = AcceptResult{Outcome: Failed,
			Err: fmt.Errorf("accept client_message_id %s: %w", b.reqs[i].ClientMessageID, err)}
		if _, err := s.txExec(ctx, tx, "ROLLBACK TO SAVEPOINT accept"); err != nil {
			return fmt.Errorf("rollback to savepoint: %w", err)
		}
	}
	if _, err := s.txExec(ctx, tx, "RELEASE SAVEPOINT accept"); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}

// finish announces the batch's waiting recipients and commits.
func (s *Store) finish(ctx context.Context, tx *sqlx.Tx, b *batch) []AcceptResult {
	if err := s.notifyWaiting(ctx, tx, b); err != nil {
		_ = tx.Rollback()
		return failAll(b.results, err)
	}
	if err := s.commit(tx); err != nil {
		return failAll(b.results, err)
	}
	return b.results
}

// notifyWaiting NOTIFYs, inside the accept's transaction, the recipients of
// the messages it created that the accepting broker does not push to (not
// Online): PostgreSQL sends the notification with the commit or not at
// all, so a committed message is never left unannounced to the replica
// its recipient is connected to. (A listener that was down meanwhile
// drains everything when it is back; see Listen.) On SQLite there is
// nothing to notify.
func (s *Store) notifyWaiting(ctx context.Context, tx *sqlx.Tx, b *batch) error {
	if s.d.name != postgresName {
		return nil
	}
	var waiting []Recipient
	for i, r := range b.reqs {
		if b.results[i].Outcome != Created {
			continue
		}
		for _, pk := range r.Recipients {
			rc := Recipient{MeshID: r.MeshID, Pubkey: pk}
			if !slices.Contains(r.Online, pk) && !slices.Contains(waiting, rc) {
				waiting = append(waiting, rc)
			}
		}
	}
	return s.notify(ctx, tx, waiting)
}

func failAll(results []AcceptResult, err error) []AcceptResult {
	err = fmt.Errorf("accept batch: %w", err)
	for i := range results {
		results[i] = AcceptResult{Outcome: Failed, Err: err}
	}
	return results
}

// validate is the schema part of B1 that the store relies on; the
// WebSocket layer normally rejects these first.
func (r *AcceptRequest) validate() *messages.Error {
	bad := func(code, detail string) *messages.Error {
		return &messages.Error{Status: http.StatusBadRequest, Code: code, Detail: detail}
	}
	switch {
	case !messages.ValidClientMessageID(r.ClientMessageID):
		return bad(messages.CodeInvalidClientID, "client_message_id must be 1-128 printable ASCII characters without spaces")
	case r.DestinationKind != KindTopic && r.DestinationKind != KindDM && r.DestinationKind != KindQueue:
		return bad(CodeInvalidDestination, "destination kind must be topic, dm or queue")
	case r.Priority != "now" && r.Priority != "next" && r.Priority != "low":
		return bad(messages.CodeInvalidPriority, "priority must be now, next or low")
	case !pubkeyPattern.MatchString(r.SenderPubkey):
		return bad(CodeInvalidSender, "sender pubkey must be 64 lowercase hex characters")
	case r.Meta != nil && !json.Valid(r.Meta):
		return bad(messages.CodeInvalidMeta, "meta must be JSON")
	}
	return nil
}
