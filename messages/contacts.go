package messages

import (
	"fmt"
	"strings"
	"time"
)

// Contact policies: what a route (a membership, or an agent session) does
// with a direct message from a key that is not one of its contacts — a
// stranger. Its contacts are the keys it wrote a direct message to, those
// whose contact request it accepted, and those auto let in.
//
//	open           every DM lands in the inbox (the default)
//	auto           every DM lands; a stranger's first makes it a contact
//	contacts_only  a stranger's DM is held as a contact request (for the
//	               policy's request TTL) until it is accepted (the held
//	               messages land, the sender becomes a contact) or refused
//	               (they are dropped); the sender is told either way
//	block_all      every DM is refused, contacts' too; the sender is told
//
// Topic, group and broadcast messages are not direct and always land.
// Receipts — acknowledgements and what a policy did — are not messages:
// they only update the outbox row they name, and no policy stops them.
// The recipient's daemon applies its own policy: the broker is not
// involved, so it works across machines, on any broker.
const (
	PolicyOpen         = "open"
	PolicyAuto         = "auto"
	PolicyContactsOnly = "contacts_only"
	PolicyBlockAll     = "block_all"
)

// Bounds of a contact request's TTL.
const (
	DefaultContactRequestTTL = 7 * 24 * time.Hour
	MinContactRequestTTL     = time.Minute
	MaxContactRequestTTL     = 90 * 24 * time.Hour
)

// Contact error codes.
const (
	CodeInvalidPolicy    = "invalid_policy"
	CodeInvalidTTL       = "invalid_request_ttl"
	CodeNoContactRequest = "no_contact_request"
	CodeMissingPeer      = "missing_peer"
	CodeAmbiguousRequest = "ambiguous_contact_request"
	CodeMessageHeld      = "message_held"
	CodeInboxRowNotFound = "inbox_row_not_found"
	CodeNoSender         = "no_sender"
)

// CheckPolicy validates a policy name.
func CheckPolicy(p string) error {
	switch p {
	case PolicyOpen, PolicyAuto, PolicyContactsOnly, PolicyBlockAll:
		return nil
	}
	return badRequest(CodeInvalidPolicy, "policy must be open, auto, contacts_only or block_all, not %q", p)
}

// CheckRequestTTL validates a contact request TTL.
func CheckRequestTTL(d time.Duration) error {
	if d < MinContactRequestTTL || d > MaxContactRequestTTL {
		return badRequest(CodeInvalidTTL, "request_ttl must be from %v to %v, not %v", MinContactRequestTTL,
			MaxContactRequestTTL, d)
	}
	return nil
}

// ContactPolicyRequest is the body of POST /v1/contacts/policy.
// RequestTTL is a Go duration (72h); absent keeps the current one.
type ContactPolicyRequest struct {
	Mesh       string `json:"mesh,omitempty"`
	Policy     string `json:"policy"`
	RequestTTL string `json:"request_ttl,omitempty"`
}

// Validate checks the policy and the TTL.
func (r *ContactPolicyRequest) Validate() error {
	if err := CheckPolicy(r.Policy); err != nil {
		return err
	}
	if r.RequestTTL == "" {
		return nil
	}
	ttl, err := time.ParseDuration(r.RequestTTL)
	if err != nil {
		return badRequest(CodeInvalidTTL, "request_ttl must be a duration such as 72h, not %q", r.RequestTTL)
	}
	return CheckRequestTTL(ttl)
}

// TTL is the request TTL asked for, 0 for none (a validated request).
func (r *ContactPolicyRequest) TTL() time.Duration {
	ttl, _ := time.ParseDuration(r.RequestTTL)
	return ttl
}

// ContactDecisionRequest is the body of POST /v1/contacts/accept and
// /v1/contacts/refuse: Peer names a pending request's sender by pubkey, a
// pubkey prefix of at least 8 hex digits, or display name.
type ContactDecisionRequest struct {
	Mesh string `json:"mesh,omitempty"`
	Peer string `json:"peer"`
}

// Validate checks that the request names a peer.
func (r *ContactDecisionRequest) Validate() error {
	if strings.TrimSpace(r.Peer) == "" {
		return badRequest(CodeMissingPeer, "peer is required: the pubkey, a pubkey prefix or the name of a pending request's sender")
	}
	return nil
}

// Contact is one contact of a route.
type Contact struct {
	Pubkey  string `json:"pubkey"`
	Name    string `json:"name"`
	Via     string `json:"via"` // sent | accepted | auto
	AddedAt string `json:"added_at"`
}

// DisplayName is the contact's name: the one names (display names by
// pubkey, from a peer list) gives its key when the daemon only knew the
// key's first digits (a DM sent to the key, not to a name), else the
// recorded one.
func (c *Contact) DisplayName(names map[string]string) string {
	if name := names[strings.ToLower(c.Pubkey)]; name != "" && strings.HasPrefix(c.Pubkey, c.Name) { // "" is a prefix too
		return name
	}
	return c.Name
}

// Contacts is the body of GET /v1/contacts and the reply to
// *ListContacts.
type Contacts struct {
	Mesh       string    `json:"mesh"`
	Policy     string    `json:"policy"`
	RequestTTL string    `json:"request_ttl"`
	Contacts   []Contact `json:"contacts"`
	Err        error     `json:"-"`
}

// Failure returns the store's error, nil on success.
func (c *Contacts) Failure() error { return c.Err }

// RequestWait is RequestTTL in words ("7 days"), for people and agents.
func (c *Contacts) RequestWait() string {
	d, err := time.ParseDuration(c.RequestTTL)
	if err != nil {
		return c.RequestTTL
	}
	return DurationWords(d)
}

// DurationWords says d in whole days, hours, minutes or seconds, the
// largest unit it is a whole number of ("7 days", "1 hour", "90 minutes",
// "90 seconds"), else as Go writes it.
func DurationWords(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}} {
		if d > 0 && d%u.d == 0 {
			if n := d / u.d; n != 1 {
				return fmt.Sprintf("%d %ss", n, u.name)
			}
			return "1 " + u.name
		}
	}
	return d.String()
}

// ContactRequest is a stranger's pending request: the messages it sent
// while held, oldest first, and when the request expires.
type ContactRequest struct {
	Pubkey   string      `json:"pubkey"`
	Name     string      `json:"name"`
	Until    string      `json:"until"`
	Messages []InboxItem `json:"messages"`
}

// ContactRequests is the body of GET /v1/contacts/requests and the reply
// to *ListContactRequests.
type ContactRequests struct {
	Mesh     string           `json:"mesh"`
	Requests []ContactRequest `json:"requests"`
	Err      error            `json:"-"`
}

// Failure returns the store's error, nil on success.
func (c *ContactRequests) Failure() error { return c.Err }

// ContactDecided is the body of a contact decision's answer: the request's
// messages, now in the inbox (accepted) or dropped (refused).
type ContactDecided struct {
	Mesh     string      `json:"mesh"`
	Pubkey   string      `json:"pubkey"`
	Name     string      `json:"name"`
	Decision string      `json:"decision"` // accepted | refused
	Messages []InboxItem `json:"messages"`
}

// Store commands of contacts (inbox.db).

// SetContactPolicy sets Mesh's policy (TTL 0: keep the current request
// TTL, else the default). The reply is *Contacts without the list.
type SetContactPolicy struct {
	Mesh   string
	Policy string
	TTL    time.Duration
	Now    int64
}

// ListContacts asks for Mesh's policy and contacts. The reply is
// *Contacts.
type ListContacts struct{ Mesh string }

// ListContactRequests asks for Mesh's pending contact requests (Peer set:
// that sender's alone). The reply is *ContactRequests.
type ListContactRequests struct {
	Mesh string
	Peer string
	Now  int64
}

// NoteContact records that Mesh wrote a direct message to Peer, which
// makes it a contact (no reply).
type NoteContact struct {
	Mesh, Peer, Name string
	Now              int64
}

// DecideContact accepts (the held messages of Peer land in the inbox, each
// with its "message" event, and Peer becomes a contact) or refuses (they
// are deleted) Peer's contact request to Mesh. The reply is
// *ContactDecision.
type DecideContact struct {
	Mesh   string
	Peer   string
	Accept bool
	Now    int64
}

// ListExpiredRequests lists up to Limit of Mesh's messages held as
// contact requests whose time ran out at Now or before. The reply is
// *ExpiredRequests.
type ListExpiredRequests struct {
	Mesh  string
	Now   int64
	Limit int
}

// ExpiredRequests is the reply to *ListExpiredRequests: the messages, and
// the earliest time another request of the mesh runs out (Unix ms; 0:
// none is held).
type ExpiredRequests struct {
	Items []ExpiredRequest
	Next  int64
	Err   error
}

// Failure returns the store's error, nil on success.
func (e *ExpiredRequests) Failure() error { return e.Err }

// ExpiredRequest is a held message whose contact request ran out: its
// inbox row id, its client_message_id as the inbox keeps it (what the
// sender's notices name) and its sender.
type ExpiredRequest struct {
	ID              string `db:"id"`
	ClientMessageID string `db:"client_message_id"`
	Sender          string `db:"sender_pubkey"`
}

// DropExpiredRequests deletes those of Mesh's messages IDs that are still
// held as contact requests run out at Now, once their senders' notices are
// queued. The reply is *RequestsDropped.
type DropExpiredRequests struct {
	Mesh string
	IDs  []string
	Now  int64
}

// RequestsDropped is the reply to *DropExpiredRequests.
type RequestsDropped struct {
	Dropped int64
	Err     error
}

// Failure returns the store's error, nil on success.
func (r *RequestsDropped) Failure() error { return r.Err }

// ContactDecision is the reply to *DecideContact: the messages released
// or dropped, and the events of those released.
type ContactDecision struct {
	Messages []InboxItem
	Events   []Event
	Err      error
}

// Failure returns the store's error, nil on success.
func (c *ContactDecision) Failure() error { return c.Err }
