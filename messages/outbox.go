package messages

import "cmp"

// Outbox row states (spec §4.4).
const (
	StatusPending  = "pending"
	StatusInflight = "inflight"
	StatusDone     = "done"
	StatusDead     = "dead"
	StatusAborted  = "aborted"
)

// AcceptSend asks for the §4.5 lookup-and-insert of one send. The IPC send
// handler sends it to the accept router, which hands it to the child for its
// Mesh and ClientMessageID; the child asks the store. The reply is
// *AcceptResult.
type AcceptSend struct {
	// Mesh is the sender: a membership's slug or a session's route. A
	// client_message_id is looked up, and unique, within it.
	Mesh            string
	ClientMessageID string
	RowID           string      // ULID for the row, used only if one is inserted
	Fingerprint     Fingerprint // SpecFingerprint.Scoped(Mesh): stored, and sent in the frame
	// SpecFingerprint is the §4.3 form alone, which a row written before
	// the fingerprint covered the sender (FingerprintSpec) is compared with.
	SpecFingerprint Fingerprint
	Payload         []byte // the SendFrame JSON
	Now             int64  // Unix ms
	// Mail is the message's mail header in the clear (nil: none), which
	// the row keeps for the sender's views (subject, thread, whether it
	// waits for acknowledgements).
	Mail *Mail
}

// AcceptOutcome is which kind of answer the §4.5 table gave.
type AcceptOutcome int

const (
	AcceptQueued    AcceptOutcome = iota // 202 status "queued" (new row, or pending + match)
	AcceptInflight                       // 202 status "inflight"
	AcceptDuplicate                      // 200 duplicate (done + match)
	AcceptConflict                       // 409 idempotency_key_reused
)

// AcceptResult is the store's answer to *AcceptSend. Err is set only when the
// store itself failed; then nothing was written.
type AcceptResult struct {
	Outcome         AcceptOutcome
	Inserted        bool   // a new row was written
	Conflict        string // e.g. "outbox_pending_fingerprint_mismatch"
	BrokerMessageID *string
	HistoryID       *string
	Reason          *string // last_error of a dead row
	Err             error
}

// Failure returns the store's error, nil on success. Every reply type has it.
func (r *AcceptResult) Failure() error { return r.Err }

// ListOutbox asks the store for one page of outbox rows, newest first.
// Status "" means every status, Mesh "" every mesh (a membership's slug or
// a session's route). Before is the keyset cursor (a row id). The reply is
// *OutboxPage.
type ListOutbox struct {
	Status string
	Mesh   string
	Limit  int
	Before string
	// ClientMessageID, when set, lists the rows of that id: one per mesh
	// that used it, or the one of Mesh.
	ClientMessageID string
	// Thread keeps the rows of a thread (its messages, and its root).
	Thread string
	// ID keeps the row of that id.
	ID string
	// AwaitingAck keeps the rows that asked for an acknowledgement and
	// may still get one (OutboxItem.AwaitsAck: pending, inflight or done,
	// neither acknowledged nor refused), enqueued before EnqueuedBefore
	// (Unix ms; 0: any time).
	AwaitingAck    bool
	EnqueuedBefore int64
	// Frames puts each row's stored frame in its item (OutboxItem.Frame).
	Frames bool
}

// OutboxPage is the reply to *ListOutbox and the body of GET /v1/outbox.
// Next is the cursor of the following page, "" on the last one.
type OutboxPage struct {
	Items []OutboxItem `json:"items"`
	Next  string       `json:"next,omitempty"`
	Err   error        `json:"-"`
}

// Failure returns the store's error, nil on success.
func (p *OutboxPage) Failure() error { return p.Err }

// OutboxItem is one outbox row as operators see it. Times are RFC 3339 UTC.
type OutboxItem struct {
	ID                 string  `json:"id"`
	ClientMessageID    string  `json:"client_message_id"`
	Mesh               string  `json:"mesh"`
	Status             string  `json:"status"`
	To                 string  `json:"to"`
	Attempts           int     `json:"attempts"`
	RequestFingerprint string  `json:"request_fingerprint"`
	EnqueuedAt         string  `json:"enqueued_at"`
	NextAttemptAt      string  `json:"next_attempt_at"`
	DeliveredAt        *string `json:"delivered_at"`
	BrokerMessageID    *string `json:"broker_message_id"`
	HistoryID          *string `json:"history_id"`
	LastError          *string `json:"last_error"`
	AbortedAt          *string `json:"aborted_at"`
	AbortedBy          *string `json:"aborted_by"`
	SupersededBy       *string `json:"superseded_by"`
	PayloadBytes       int     `json:"payload_bytes"`
	// Body is the message's text, on the rows of a thread (GET
	// /v1/outbox?thread=): a direct message opened with the key of the
	// route that sent it. Absent once retention emptied the payload, or
	// when that route is no longer served.
	Body *string `json:"body,omitempty"`
	// Frame is the stored send frame Body is read from, from the store to
	// the IPC server (ListOutbox.Frames); never on the wire.
	Frame []byte `json:"-"`
	// The mail header the message carried (absent: none).
	Subject     string `json:"subject,omitempty"`
	ThreadID    string `json:"thread_id,omitempty"`
	ReplyToID   string `json:"reply_to_id,omitempty"`
	Importance  string `json:"importance,omitempty"`
	AckRequired bool   `json:"ack_required,omitempty"`
	// AckedBy are the recipients that acknowledged it, first first;
	// Receipts what recipients' contact policies did with it.
	AckedBy  []Acker   `json:"acked_by,omitempty"`
	Receipts []Receipt `json:"receipts,omitempty"`
}

// Acker is a recipient that acknowledged a message, and when (RFC 3339:
// when the broker took the acknowledgement).
type Acker struct {
	Pubkey string `json:"pubkey"`
	Name   string `json:"name"`
	At     string `json:"at"`
}

// Receipt is what a recipient's daemon said of a message: held as a
// contact request until Until, refused (Reason), or accepted.
type Receipt struct {
	Kind   string `json:"kind"`
	Pubkey string `json:"pubkey"`
	Name   string `json:"name"`
	At     string `json:"at"`
	Until  string `json:"until,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// AwaitsAck says whether the message asked for an acknowledgement and may
// still get one: none has come, and no recipient's contact policy refused
// it (a refused direct message is never delivered: block_all, its contact
// request refused, or run out unanswered).
func (it *OutboxItem) AwaitsAck() bool {
	if !it.AckRequired || len(it.AckedBy) > 0 {
		return false
	}
	for i := range it.Receipts {
		if it.Receipts[i].Kind == ReceiptRefused {
			return false
		}
	}
	return true
}

// Describe says in words what the receipt tells the sender, naming the
// recipient (its key when it has no name): "held by cat as a contact
// request until …", "refused by cat: …", "accepted by cat as a contact".
func (r *Receipt) Describe() string {
	who := cmp.Or(r.Name, r.Pubkey)
	switch r.Kind {
	case ReceiptHeld:
		return "held by " + who + " as a contact request until " + r.Until
	case ReceiptRefused:
		if r.Reason == "" {
			return "refused by " + who
		}
		return "refused by " + who + ": " + r.Reason
	case ReceiptAccepted:
		return "accepted by " + who + " as a contact"
	}
	return r.Kind + " by " + who
}

// RequeueRequest is the body of POST /v1/outbox/requeue. Patch, when given,
// replaces the payload; it is validated and fingerprinted like a new send.
// With no NewClientMessageID (and none in Patch) the daemon mints a ULID.
type RequeueRequest struct {
	ID                 string       `json:"id"`
	NewClientMessageID string       `json:"new_client_message_id,omitempty"`
	Patch              *SendRequest `json:"patch_payload,omitempty"`
}

// RequeueOutbox asks the store to retire row ID (dead or pending) and insert
// its successor, in one transaction (spec §4.7). Replacement is nil to keep
// the old payload and fingerprint; the successor goes to the replacement's
// mesh, else the old row's, and NewClientMessageID must be free there.
// Scope, when set, is the only mesh whose rows the caller may act on (a
// session's route); a row of another is not found. The reply is
// *RequeueResult.
type RequeueOutbox struct {
	ID                 string
	Scope              string
	NewRowID           string
	NewClientMessageID string
	Replacement        *Replacement
	Now                int64
}

// Replacement is a patched payload for a requeue, fingerprinted as a new
// send of Mesh (FingerprintScoped).
type Replacement struct {
	Mesh        string
	Fingerprint Fingerprint
	Payload     []byte
	Mail        *Mail
}

// RequeueResult is the reply to *RequeueOutbox and the body of a successful
// POST /v1/outbox/requeue.
type RequeueResult struct {
	AbortedRowID       string `json:"aborted_row_id"`
	NewRowID           string `json:"new_row_id"`
	NewClientMessageID string `json:"new_client_message_id"`
	Err                error  `json:"-"`
}

// Failure returns the store's error, nil on success.
func (r *RequeueResult) Failure() error { return r.Err }

// DropRequest is the body of POST /v1/outbox/drop.
type DropRequest struct {
	ID string `json:"id"`
}

// DropOutbox asks the store to give up on row ID (dead or pending): it
// becomes aborted by the operator with no successor, and its
// client_message_id stays taken. Scope is as in RequeueOutbox. The reply
// is *DropResult.
type DropOutbox struct {
	ID    string
	Scope string
	Now   int64
}

// DropResult is the reply to *DropOutbox and the 200 body of
// POST /v1/outbox/drop.
type DropResult struct {
	AbortedRowID    string `json:"aborted_row_id"`
	ClientMessageID string `json:"client_message_id"`
	Err             error  `json:"-"`
}

// Failure returns the store's error, nil on success.
func (r *DropResult) Failure() error { return r.Err }

// OutboxStats asks the store for row counts per mesh and status. The reply
// is *OutboxCounts.
type OutboxStats struct{}

// OutboxCounts is the reply to *OutboxStats: mesh → status → rows.
type OutboxCounts struct {
	ByMesh map[string]map[string]int
	// SyncBroken names the databases whose WAL fsync failed since the
	// daemon started, with the error ("" when none did).
	SyncBroken string
	Err        error
}

// Failure returns the store's error, nil on success.
func (c *OutboxCounts) Failure() error { return c.Err }
