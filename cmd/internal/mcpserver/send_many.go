package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/messages"
)

// A send to several recipients: send_message with to as a list (as
// upstream claudemesh's and Agent Mail's take it) sends each recipient a
// message of its own — one outbox row, one idempotency key — under a
// client_message_id derived from the caller's (recipientKey), so that a
// retry with the same key and list sends none twice.

// maxRecipients bounds a list to.
const maxRecipients = 32

// recipients is send_message's to: one recipient (a JSON string) or a
// list of them (an array, list set even when it holds one).
type recipients struct {
	names []string
	list  bool
}

func (r *recipients) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
		r.list = true
		return json.Unmarshal(b, &r.names)
	}
	var one string
	if err := json.Unmarshal(b, &one); err != nil {
		return err
	}
	r.names = []string{one}
	return nil
}

// MarshalJSON writes it back as it came: a string or an array.
func (r recipients) MarshalJSON() ([]byte, error) {
	if r.list {
		return json.Marshal(r.names)
	}
	return json.Marshal(r.first())
}

// first is the recipient of a to given as a string.
func (r recipients) first() string {
	if len(r.names) == 0 {
		return ""
	}
	return r.names[0]
}

// recipientsSchema is the schema of a to: a non-empty string, or a list
// of 1 to maxRecipients of them.
func recipientsSchema(description string) *jsonschema.Schema {
	one := func() *jsonschema.Schema { // a schema is a tree: each place its own
		return &jsonschema.Schema{Type: "string", MinLength: jsonschema.Ptr(1), MaxLength: jsonschema.Ptr(messages.MaxPeerNameBytes)}
	}
	return &jsonschema.Schema{Description: description, AnyOf: []*jsonschema.Schema{one(),
		{Type: "array", Items: one(), MinItems: jsonschema.Ptr(1), MaxItems: jsonschema.Ptr(maxRecipients)}}}
}

// recipientOut is one recipient's message of a send to a list.
type recipientOut struct {
	To              string `json:"to" jsonschema:"The recipient as given."`
	ResolvedTo      string `json:"resolved_to" jsonschema:"The pubkey, #topic, @group or * it was sent to."`
	ClientMessageID string `json:"client_message_id" jsonschema:"This message's idempotency key: the one you gave (or the one made for you), a slash, and the recipient."`
	Status          string `json:"status" jsonschema:"queued or inflight (on its way), or duplicate (already sent under this id)."`
	RecipientName   string `json:"recipient_name,omitempty" jsonschema:"The recipient peer's display name, for a peer that is online."`
	RecipientOnline *bool  `json:"recipient_online,omitempty" jsonschema:"For a direct message: whether the recipient is online now."`
}

// sendToEach sends in to each recipient of its list: every recipient is
// checked and resolved first, and nothing is sent unless all are; two
// names of one peer send it one message.
func (m *mcpServer) sendToEach(ctx context.Context, in sendMessageIn) (*mcp.CallToolResult, *sendMessageOut, error) {
	if len(in.To.names) == 0 {
		return nil, nil, fmt.Errorf("`to` is an empty list; nothing was sent: name at least one peer, #topic, @group or *")
	}
	key := in.ClientMessageID
	if key == "" {
		key = ulid.Make().String()
	}
	type send struct {
		s   *Session
		req *messages.SendRequest
		out *sendMessageOut
	}
	var sends []send
	seen := map[string]bool{}
	for _, to := range in.To.names {
		s, req, out, err := m.prepareSend(ctx, in, to, recipientKey(key, strings.TrimSpace(to)))
		if err != nil {
			return nil, nil, fmt.Errorf("to %q: %w", to, err)
		}
		if target := strings.ToLower(out.ResolvedTo); !seen[target] {
			seen[target] = true
			sends = append(sends, send{s, req, out})
		}
	}
	all := &sendMessageOut{ClientMessageID: key, Status: "duplicate", Recipients: make([]recipientOut, 0, len(sends))}
	var given, resolved []string
	for i, x := range sends {
		if err := m.deliverSend(ctx, x.s, x.req, x.out, false); err != nil {
			return nil, nil, fmt.Errorf("%w; %s: call send_message again with client_message_id %s and the same to: "+
				"none is sent twice", err, sentSoFar(sends[:i], func(x send) string { return x.out.To }), key)
		}
		o := x.out
		all.Recipients = append(all.Recipients, recipientOut{To: o.To, ResolvedTo: o.ResolvedTo, ClientMessageID: o.ClientMessageID,
			Status: o.Status, RecipientName: o.RecipientName, RecipientOnline: o.RecipientOnline})
		if o.Status != "duplicate" {
			all.Status = o.Status
		}
		given, resolved = append(given, o.To), append(resolved, o.ResolvedTo)
	}
	all.To, all.ResolvedTo = strings.Join(given, ", "), strings.Join(resolved, ", ")
	var b strings.Builder
	fmt.Fprintf(&b, "Sent %d %s (client_message_id %s/<recipient> each):", len(sends), plural(len(sends), "message", "messages"), key)
	for i := range sends {
		b.WriteString("\n- " + sendSummary(sends[i].out))
	}
	return textResult(b.String()), all, nil
}

// sentSoFar says which recipients of a list were sent their message
// before a failure.
func sentSoFar[T any](done []T, name func(T) string) string {
	if len(done) == 0 {
		return "none was sent"
	}
	names := make([]string, len(done))
	for i, d := range done {
		names[i] = name(d)
	}
	return "sent to " + strings.Join(names, ", ") + " only"
}

// recipientKey is the client_message_id of a list send's message to one
// recipient: <key>/<to>, within the id rules (1-128 printable ASCII
// characters, no spaces). A recipient that is not printable ASCII or
// longer than 64 bytes is named by the first 16 hex digits of its
// SHA-256, and a key that leaves no room for the recipient is cut, the
// hash of the whole key after it: the same key and recipient always make
// the same id, and two recipients never one.
func recipientKey(key, to string) string {
	if !messages.ValidClientMessageID(to) || len(to) > 64 {
		to = shortHash(to)
	}
	if room := messages.MaxIDLength - 1 - len(to); len(key) > room {
		key = key[:room-17] + "~" + shortHash(key)
	}
	return key + "/" + to
}

// shortHash is the first 16 hex digits of s's SHA-256.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}
