package messages

import (
	"encoding/json"

	"github.com/claudemesh/claudemesh-go/messages/fifo"
)

// Store commands of the delivery path. Each is sent to the store actor and
// answered after its batch commits.

// DispatchReady registers a mesh's dispatcher with the store when its
// broker link comes up: the store returns the mesh's inflight rows to
// pending (they belong to a link that is gone), then claims due rows for
// the dispatcher whenever it has credit — at the end of the very batch that
// inserted them, so a claim costs no transaction of its own — and sends
// them as *ClaimedRows. Credit starts at Window and comes back with each
// SendOutcome of the same Gen. Sent with a sender (the dispatcher); the
// reply is *OutcomeApplied.
type DispatchReady struct {
	Mesh   string
	Gen    uint64 // unique per link: outcomes of an older one return no credit
	Window int
	MaxAge int64 // ms; pending rows enqueued longer ago go dead (0: never)
	Now    int64
}

// DispatchWake tells the store that rows of a mesh may be due (the
// dispatcher's timer for the next due row fired); no reply.
type DispatchWake struct{ Mesh string }

// ClaimedRow is one outbox row claimed for sending.
type ClaimedRow struct {
	ID              string
	ClientMessageID string
	Payload         []byte // the send frame, sent as it is
	Attempts        int    // this attempt included
}

// ClaimedRows is what the store sends a ready dispatcher after a batch
// claimed rows for it (moved to inflight, attempts+1) or retired some past
// their max age. NextDue is when the earliest pending row left becomes due
// (HasNext false: none).
type ClaimedRows struct {
	Gen     uint64
	Rows    []ClaimedRow
	Expired int64
	NextDue int64
	HasNext bool
}

// Send outcomes the dispatcher reports for a claimed row.
const (
	OutcomeDone  = "done"  // the broker accepted it (201, or 200 duplicate)
	OutcomeDead  = "dead"  // permanent rejection: never retried
	OutcomeRetry = "retry" // transient: pending again at Next
)

// SendOutcome records what became of one attempt. The reply, to a sender
// that asks for one, is *OutcomeApplied (the dispatcher sends it without:
// the store logs a failure to apply it).
type SendOutcome struct {
	Mesh            string
	Gen             uint64 // the DispatchReady the row was claimed under
	RowID           string
	Outcome         string
	BrokerMessageID string
	HistoryID       string
	Reason          string
	Next            int64 // retry: when the row is due again
	Now             int64
}

// OutcomeApplied is the reply to *SendOutcome. StateChanged means the row
// was no longer inflight (requeued or expired meanwhile): nothing changed.
type OutcomeApplied struct {
	StateChanged bool
	Err          error
}

// Failure returns the store's error, nil on success.
func (o *OutcomeApplied) Failure() error { return o.Err }

// ReleaseMesh returns a mesh's inflight rows to pending without counting an
// attempt (the connection dropped before the answers came) and ends the
// mesh's DispatchReady: nothing is claimed for it until the next one. The
// reply is *OutcomeApplied.
type ReleaseMesh struct {
	Mesh string
	Now  int64
}

// StoreInbound inserts a received message into the inbox, deduplicated by
// its client_message_id, and for a new, decrypted row appends a "message"
// event. The reply is *InboundStored.
type StoreInbound struct {
	Item InboxItem
}

// InboundStored is the reply to *StoreInbound. ID is the item's, so that
// its sender can have several in flight. Event is nil when nothing new was
// stored or the row did not decrypt.
//
// A direct message meets its route's contact policy first (contacts.go):
// Refused says block_all refused it (nothing stored); Held, that it is
// held as a contact request until then (Unix ms; 0: it is not).
type InboundStored struct {
	ID       string
	Inserted bool
	Event    *Event
	Held     int64
	Refused  bool
	Err      error
}

// Failure returns the store's error, nil on success.
func (s *InboundStored) Failure() error { return s.Err }

// InboxItem is one inbox row (spec §4.12), as GET /v1/inbox returns it and
// as the "message" event carries it.
type InboxItem struct {
	ID              string          `json:"id"`
	ClientMessageID string          `json:"client_message_id"`
	BrokerMessageID string          `json:"broker_message_id,omitempty"`
	Mesh            string          `json:"mesh"`
	Kind            string          `json:"kind"` // dm | topic
	Topic           NullString      `json:"topic"`
	TopicName       string          `json:"topic_name,omitempty"` // the name of Topic's topic when its mesh's connection knows it: filled as the inbox is read, not stored
	SenderPubkey    string          `json:"sender_pubkey"`
	SenderName      string          `json:"sender_name"`
	Body            *string         `json:"body"` // null when it could not be decrypted
	Meta            json.RawMessage `json:"meta,omitempty"`
	ReceivedAt      string          `json:"received_at"` // RFC 3339
	ReceivedAtMs    int64           `json:"-"`
	ReplyToID       NullString      `json:"reply_to_id"`
	// SeenAt is when the row was first read (RFC 3339; null: unread), as it
	// was before the listing that returns it stamped it.
	SeenAt *string `json:"seen_at"`
	// RecipientPubkey is the key the message reached: a session's key
	// (RecipientKind "session") or the member's ("member").
	RecipientPubkey string `json:"recipient_pubkey,omitempty"`
	RecipientKind   string `json:"recipient_kind,omitempty"`
	// The mail header (absent: none; importance absent: normal). AckedAt
	// is when this recipient acknowledged it (RFC 3339; absent: not yet);
	// HeldUntil, on a contact request's message, when the request expires.
	Subject     string  `json:"subject,omitempty"`
	ThreadID    string  `json:"thread_id,omitempty"`
	Importance  string  `json:"importance,omitempty"`
	AckRequired bool    `json:"ack_required,omitempty"`
	AckedAt     *string `json:"acked_at,omitempty"`
	HeldUntil   *string `json:"held_until,omitempty"`
	// Priority is the sender's (now, next or low; absent for a message
	// received before claudemesh kept it), SentAt when the broker took the
	// message, as it wrote it (absent: unknown).
	Priority string `json:"priority,omitempty"`
	SentAt   string `json:"sent_at,omitempty"`
}

// Marshal is the item's JSON, byte for byte what json.Marshal makes of it
// (FuzzInboxItemMarshal), without reflection for an item with no meta:
// the data of its "message" event.
func (it *InboxItem) Marshal() ([]byte, error) {
	if len(it.Meta) > 0 {
		return json.Marshal(it) // json.Marshal compacts and escapes raw meta
	}
	b := make([]byte, 0, 256+len(it.SenderName)+len(it.ClientMessageID)+len(it.Topic)+len(Deref(it.Body)))
	b = AppendJSONString(append(b, `{"id":`...), it.ID, true)
	b = AppendJSONString(append(b, `,"client_message_id":`...), it.ClientMessageID, true)
	if it.BrokerMessageID != "" {
		b = AppendJSONString(append(b, `,"broker_message_id":`...), it.BrokerMessageID, true)
	}
	b = AppendJSONString(append(b, `,"mesh":`...), it.Mesh, true)
	b = AppendJSONString(append(b, `,"kind":`...), it.Kind, true)
	b = it.Topic.append(append(b, `,"topic":`...), true)
	b = AppendJSONString(append(b, `,"sender_pubkey":`...), it.SenderPubkey, true)
	b = AppendJSONString(append(b, `,"sender_name":`...), it.SenderName, true)
	if b = append(b, `,"body":`...); it.Body == nil {
		b = append(b, "null"...)
	} else {
		b = AppendJSONString(b, *it.Body, true)
	}
	b = AppendJSONString(append(b, `,"received_at":`...), it.ReceivedAt, true)
	b = it.ReplyToID.append(append(b, `,"reply_to_id":`...), true)
	if b = append(b, `,"seen_at":`...); it.SeenAt == nil {
		b = append(b, "null"...)
	} else {
		b = AppendJSONString(b, *it.SeenAt, true)
	}
	if it.RecipientPubkey != "" {
		b = AppendJSONString(append(b, `,"recipient_pubkey":`...), it.RecipientPubkey, true)
	}
	if it.RecipientKind != "" {
		b = AppendJSONString(append(b, `,"recipient_kind":`...), it.RecipientKind, true)
	}
	return append(it.appendMail(b), '}'), nil
}

// appendMail appends the mail fields of the item, as json.Marshal would.
func (it *InboxItem) appendMail(b []byte) []byte {
	for _, f := range [...]struct{ key, value string }{{`,"subject":`, it.Subject}, {`,"thread_id":`, it.ThreadID},
		{`,"importance":`, it.Importance}} {
		if f.value != "" {
			b = AppendJSONString(append(b, f.key...), f.value, true)
		}
	}
	if it.AckRequired {
		b = append(b, `,"ack_required":true`...)
	}
	if it.AckedAt != nil {
		b = AppendJSONString(append(b, `,"acked_at":`...), *it.AckedAt, true)
	}
	if it.HeldUntil != nil {
		b = AppendJSONString(append(b, `,"held_until":`...), *it.HeldUntil, true)
	}
	for _, f := range [...]struct{ key, value string }{{`,"priority":`, it.Priority}, {`,"sent_at":`, it.SentAt}} {
		if f.value != "" {
			b = AppendJSONString(append(b, f.key...), f.value, true)
		}
	}
	return b
}

// Event is one server-sent event: a persisted, strictly increasing id, a
// name and one line of JSON. Mesh is the "mesh" its data names, so that a
// stream of one mesh passes over the others' events without decoding
// them; "" when the data names none: such an event (outbox_pressure_high)
// belongs to every mesh. The store sets it on the events it makes of a
// message or a contact request, from the mesh it wrote into their data;
// whoever hands another event to a stream (the events actor, a replay)
// reads it from the data.
type Event struct {
	ID   int64
	Name string
	Data []byte
	Mesh string
}

// EventMesh is the "mesh" an event's data names, "" when it names none or
// is not a JSON object.
func EventMesh(data []byte) string {
	var d struct {
		Mesh string `json:"mesh"`
	}
	if json.Unmarshal(data, &d) != nil {
		return ""
	}
	return d.Mesh
}

// ForMesh reports whether the event belongs to a stream of mesh ("": the
// unfiltered stream, which carries every event).
func (e *Event) ForMesh(mesh string) bool { return mesh == "" || e.Mesh == "" || e.Mesh == mesh }

// EventsSince asks the store for persisted events after After. The reply is
// *EventsPage; Gone means events after After were already trimmed.
type EventsSince struct {
	After int64
	Limit int
}

// EventsPage is the reply to *EventsSince.
type EventsPage struct {
	Events []Event
	Gone   bool
	Err    error
}

// Failure returns the store's error, nil on success.
func (e *EventsPage) Failure() error { return e.Err }

// AppendEvent persists an event that is not an inbox row (broker_status,
// peer_join, …). The reply is *EventAppended.
type AppendEvent struct {
	Name string
	Data []byte
}

// EventAppended is the reply to *AppendEvent.
type EventAppended struct {
	Event *Event
	Err   error
}

// Failure returns the store's error, nil on success.
func (e *EventAppended) Failure() error { return e.Err }

// ListInbox asks for one page of the inbox (spec §3.8). The reply is
// *InboxPage.
type ListInbox struct {
	Since int64
	Topic string
	From  string
	Mesh  string
	Limit int
	After string
	// UnreadOnly lists the rows not seen yet; MarkSeen stamps the listed
	// unread rows seen (their items still show them unread).
	UnreadOnly bool
	MarkSeen   bool
	Now        int64 // Unix ms, the stamp
	// Thread keeps a thread's messages and its root; Importance the
	// messages of the importances it lists, separated by commas (normal,
	// high, urgent); Unacked the messages that asked for an
	// acknowledgement this recipient has not given; ID the message of
	// that inbox row id.
	Thread     string
	Importance string
	Unacked    bool
	ID         string
}

// InboxPage is the reply to *ListInbox and the body of GET /v1/inbox.
// MarkedSeen counts the listed rows the request stamped seen.
type InboxPage struct {
	Items      []InboxItem `json:"items"`
	Next       string      `json:"next,omitempty"`
	MarkedSeen int64       `json:"marked_seen"`
	Err        error       `json:"-"`
}

// MarkInboxSeen stamps rows seen (POST /v1/inbox/seen); Mesh, when set,
// confines it to a session's rows. The reply is *InboxChanged.
type MarkInboxSeen struct {
	IDs  []string
	Mesh string
	Now  int64
}

// DeleteInbox removes inbox rows (DELETE /v1/inbox[/<id>]): the row ID, or
// the rows of Mesh received before Before; All must be set to remove
// every row. The reply is *InboxChanged.
type DeleteInbox struct {
	ID     string
	Mesh   string
	Before int64
	All    bool
}

// InboxChanged is the reply to *MarkInboxSeen and *DeleteInbox: how many
// rows changed.
type InboxChanged struct {
	Rows int64
	Err  error
}

// Failure returns the store's error, nil on success.
func (c *InboxChanged) Failure() error { return c.Err }

// Failure returns the store's error, nil on success.
func (p *InboxPage) Failure() error { return p.Err }

// Subscribe asks the events actor for a live stream for Identity (an agent
// session's route, "mesh:<slug>" for a stream of one mesh, "" for the
// operator's unfiltered view), carrying the events of Mesh alone (and those
// of no mesh) when Mesh is set. The reply is *Subscription.
type Subscribe struct{ Identity, Mesh string }

// Event streams open at once: at most MaxStreams in all, and
// MaxStreamsPerIdentity for one identity, so that one agent opening streams
// never starves the others (every agent session holds one).
const (
	MaxStreams            = 1024
	MaxStreamsPerIdentity = 16
)

// Subscription is the reply to *Subscribe. Events holds every event
// published after the subscription, in id order, until the stream reads
// it; it is closed (Done) when the stream cannot keep up (the client
// resumes by id) or the daemon stops.
type Subscription struct {
	ID     int64
	Events *fifo.Queue[Event]
	Err    error
}

// Failure returns the refusal (429 too_many_streams), nil on success.
func (s *Subscription) Failure() error { return s.Err }

// Unsubscribe ends a stream; no reply.
type Unsubscribe struct{ ID int64 }

// Publish hands a committed event to every stream; no reply.
type Publish struct{ Event Event }

// ListPeers asks a mesh's broker connection for the peer list. The reply is
// *PeersList.
type ListPeers struct{}

// PeersList is the reply to *ListPeers and, per mesh, the body of GET
// /v1/peers.
type PeersList struct {
	Mesh  string `json:"mesh"`
	Peers []Peer `json:"peers"`
	Err   error  `json:"-"`
}

// Failure returns the error, nil on success.
func (p *PeersList) Failure() error { return p.Err }

// SetProfile is the body of POST /v1/profile and the message to a mesh's
// broker connection; only the fields present change. The reply is
// *ProfileApplied.
type SetProfile struct {
	Mesh         string    `json:"mesh,omitempty"`
	Summary      *string   `json:"summary,omitempty"`
	Status       *string   `json:"status,omitempty"` // idle | working | dnd
	Visible      *bool     `json:"visible,omitempty"`
	Avatar       *string   `json:"avatar,omitempty"`
	Title        *string   `json:"title,omitempty"`
	Bio          *string   `json:"bio,omitempty"`
	Capabilities *[]string `json:"capabilities,omitempty"`
}

// ProfileApplied is the reply to *SetProfile and the body of its answer.
type ProfileApplied struct {
	Applied []string `json:"applied"`
	Meshes  []string `json:"meshes"`
	Err     error    `json:"-"`
}

// Failure returns the error, nil on success.
func (p *ProfileApplied) Failure() error { return p.Err }

// MeshStatus asks a mesh's broker connection for its state. The reply is
// *MeshStatusReply.
type MeshStatus struct{}

// MeshStatusReply is the reply to *MeshStatus.
type MeshStatusReply struct {
	Connected bool
	Breaker   string // closed | open | half_open
	LagMs     int64
	Revoked   bool // the broker refused the member key as revoked
	Features  []string
	Pace      SendPace
	Err       error
}

// Failure returns the error, nil on success.
func (m *MeshStatusReply) Failure() error { return m.Err }

// PruneInbox is one retention pass over inbox.db: inbox rows received
// before Before, messages held as contact requests that expired by Now,
// and the event log beyond EventsKeep events or older than EventsBefore
// (Unix ms), at most Limit rows of each. The reply is *Pruned.
type PruneInbox struct {
	Before       int64
	EventsKeep   int
	EventsBefore int64
	Limit        int
	Now          int64
}

// PruneOutbox is one retention pass over outbox.db: the payloads of done
// and aborted rows older than Before (Unix ms), and the audit entries
// written before it, at most Limit of each. The reply is *Pruned.
type PruneOutbox struct {
	Before int64
	Limit  int
}

// Pruned is the reply to *PruneInbox and *PruneOutbox: how many rows each
// part changed, and whether a part stopped at its limit (More).
type Pruned struct {
	Inbox, Events, Outbox, Audit int64
	// InboxRows is how many inbox rows remain (PruneInbox only; -1 else).
	InboxRows int64
	More      bool
	Err       error
}

// Failure returns the store's error, nil on success.
func (p *Pruned) Failure() error { return p.Err }
