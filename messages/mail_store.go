package messages

// Store commands and IPC bodies of agent mail (mail.go).

// RecordReceipt records on the sender's outbox row (Mesh,
// ClientMessageID) what the recipient Peer's daemon said of its message:
// Kind is a Receipt* constant; At when the broker took the receipt, Until
// (held) when the contact request expires, both Unix ms. A receipt for a
// row Mesh does not have is dropped, as is one for a direct message from
// a key other than its recipient's. The reply is *ReceiptRecorded.
type RecordReceipt struct {
	Mesh            string
	ClientMessageID string
	Kind            string
	Peer            string
	PeerName        string
	At              int64
	Until           int64
	Reason          string
}

// ReceiptRecorded is the reply to *RecordReceipt: Inserted for a receipt
// not recorded before, with the row's subject and thread.
type ReceiptRecorded struct {
	Inserted bool
	Subject  string
	ThreadID string
	Err      error
}

// Failure returns the store's error, nil on success.
func (r *ReceiptRecorded) Failure() error { return r.Err }

// ReceiptEvent is the data of a "receipt" event: what a recipient said of
// one of this daemon's messages.
type ReceiptEvent struct {
	Mesh            string `json:"mesh"`
	ClientMessageID string `json:"client_message_id"`
	Kind            string `json:"kind"`
	PeerPubkey      string `json:"peer_pubkey"`
	PeerName        string `json:"peer_name"`
	At              string `json:"at"`
	Until           string `json:"until,omitempty"`
	Reason          string `json:"reason,omitempty"`
	Subject         string `json:"subject,omitempty"`
	ThreadID        string `json:"thread_id,omitempty"`
}

// ContactRequestEvent is the data of a "contact_request" event: a
// stranger's direct message held by a contacts_only policy.
type ContactRequestEvent struct {
	Mesh         string `json:"mesh"`
	ID           string `json:"id"`
	SenderPubkey string `json:"sender_pubkey"`
	SenderName   string `json:"sender_name"`
	Subject      string `json:"subject,omitempty"`
	Until        string `json:"until"`
}

// GetInboxRow asks for one inbox row by its id (of Mesh, when set: a
// session's own). The reply is *InboxRowFound.
type GetInboxRow struct {
	ID   string
	Mesh string
}

// InboxRowFound is the reply to *GetInboxRow; Item is nil when there is no
// such row.
type InboxRowFound struct {
	Item *InboxItem
	Err  error
}

// Failure returns the store's error, nil on success.
func (r *InboxRowFound) Failure() error { return r.Err }

// MarkInboxAcked stamps acked_at on row ID, once. The reply is
// *InboxChanged.
type MarkInboxAcked struct {
	ID  string
	Now int64
}

// ThreadOf asks for the thread of the message (Mesh, ClientMessageID):
// received (inbox.db, *ThreadOfInbox) or sent (outbox.db, *ThreadOfOutbox).
// The reply is *ThreadFound.
type (
	ThreadOfInbox  struct{ Mesh, ClientMessageID string }
	ThreadOfOutbox struct{ Mesh, ClientMessageID string }
)

// ThreadFound is the reply to *ThreadOfInbox and *ThreadOfOutbox: Found
// says the message is there, Thread its thread ("" for a root).
type ThreadFound struct {
	Found  bool
	Thread string
	Err    error
}

// Failure returns the store's error, nil on success.
func (t *ThreadFound) Failure() error { return t.Err }

// SearchInbox searches the subject and body of the inbox (of Mesh, when
// set), the best matches first. The reply is *InboxPage.
type SearchInbox struct {
	Query string
	Mesh  string
	Limit int
}

// Bounds of an inbox search.
const (
	MaxSearchQueryBytes = 1024
	DefaultSearchLimit  = 20
	MaxSearchLimit      = 100
)

// InboxAcked is the body of POST /v1/inbox/<id>/ack's answer: the row, when
// it was acknowledged, and the receipt on its way to the sender.
type InboxAcked struct {
	ID                     string `json:"id"`
	ClientMessageID        string `json:"client_message_id"`
	AckedAt                string `json:"acked_at"`
	ReceiptClientMessageID string `json:"receipt_client_message_id"`
	ReceiptStatus          string `json:"receipt_status"` // queued | inflight | duplicate
}
