package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// The tools' arguments and results. The jsonschema tags are what the agent
// reads about each argument.
type (
	sendMessageIn struct {
		To              recipients `json:"to" jsonschema:"Who gets the message: a peer's display name as list_peers shows it, a peer's 64-hex pubkey or a unique prefix of it (at least 8 hex digits), #topic for everyone following a topic, @group for a group, or * for every peer on the mesh; or a list of them, each sent its own message."`
		Message         string     `json:"message" jsonschema:"The text to send, at most 32 KiB."`
		Priority        string     `json:"priority,omitempty" jsonschema:"How urgent it is. now: pushed at once, even to a recipient that is working or set dnd (it interrupts). next (the default): pushed at once to an idle recipient; while the recipient is working or dnd the broker holds it until its turn ends, though its check_messages shows it at once. low: as next, for what can wait."`
		ReplyToID       string     `json:"reply_to_id,omitempty" jsonschema:"The message this answers (its client_message_id, or its id as check_messages shows it): the reply joins that message's thread, and the recipient sees what it answers."`
		ClientMessageID string     `json:"client_message_id,omitempty" jsonschema:"Idempotency key. Omit it and a fresh one is made and returned; to retry a send whose outcome you did not see, call again with the id it returned and the same arguments: it is never delivered twice."`
		Subject         string     `json:"subject,omitempty" jsonschema:"A subject line, at most 200 bytes (sealed with a direct message like its text)."`
		ThreadID        string     `json:"thread_id,omitempty" jsonschema:"The thread this message belongs to (get_thread reads it). Default: the thread of the message reply_to_id names; else the message starts a thread of its own, named by its client_message_id."`
		Importance      string     `json:"importance,omitempty" jsonschema:"normal (the default), high or urgent: the recipient can pick out the important ones."`
		AckRequired     bool       `json:"ack_required,omitempty" jsonschema:"Ask the recipient to acknowledge the message (acknowledge_message); list_awaiting_acks shows what is still unacknowledged."`
	}
	sendMessageOut struct {
		ClientMessageID string `json:"client_message_id" jsonschema:"The message's idempotency key."`
		Status          string `json:"status" jsonschema:"queued or inflight (on its way), or duplicate (this id was already delivered)."`
		To              string `json:"to" jsonschema:"The recipient as given."`
		ResolvedTo      string `json:"resolved_to" jsonschema:"The pubkey, #topic, @group or * it was sent to."`
		RecipientName   string `json:"recipient_name,omitempty" jsonschema:"The recipient peer's display name, for a direct message to a peer that is online."`
		RecipientOnline *bool  `json:"recipient_online,omitempty" jsonschema:"For a direct message: whether the recipient is online now."`
		RecipientStatus string `json:"recipient_status,omitempty" jsonschema:"For a direct message to a busy recipient: working or dnd, as its last status said."`
		HeldUntilIdle   bool   `json:"held_until_idle,omitempty" jsonschema:"The recipient is busy and the priority is not now: the message waits until its turn ends (unless it checks its messages first)."`
		// Recipients is a list to's: one message per recipient (send_many.go).
		Recipients []recipientOut `json:"recipients,omitempty" jsonschema:"When to is a list: each recipient's message, under its own client_message_id."`
	}
	checkMessagesIn struct {
		Limit int `json:"limit,omitempty" jsonschema:"At most this many messages, 1-100 (default 20); call again for the rest."`
	}
	checkMessagesOut struct {
		Messages []inboxMessage `json:"messages" jsonschema:"The unread messages, oldest first; they count as read from now on."`
		More     bool           `json:"more" jsonschema:"More unread messages are waiting: call check_messages again."`
	}
	inboxMessage struct {
		ID              string `json:"id" jsonschema:"The message's id, for reply_to_id."`
		From            string `json:"from" jsonschema:"The sender's display name."`
		FromPubkey      string `json:"from_pubkey" jsonschema:"The sender's pubkey: send_message takes it as to."`
		Kind            string `json:"kind" jsonschema:"dm (to you alone) or topic (to a #topic, @group or everyone)."`
		Topic           string `json:"topic,omitempty" jsonschema:"The topic or group it was sent to (a topic by its id)."`
		TopicName       string `json:"topic_name,omitempty" jsonschema:"The topic's name, when the daemon knows it (send_message takes #name)."`
		Body            string `json:"body" jsonschema:"The text."`
		ReceivedAt      string `json:"received_at" jsonschema:"When it arrived (RFC 3339)."`
		ReplyToID       string `json:"reply_to_id,omitempty" jsonschema:"The client_message_id of the message it answers."`
		ClientMessageID string `json:"client_message_id" jsonschema:"The sender's idempotency key."`
		Subject         string `json:"subject,omitempty" jsonschema:"Its subject."`
		ThreadID        string `json:"thread_id,omitempty" jsonschema:"The thread it belongs to: get_thread reads it, send_message with thread_id answers in it."`
		Importance      string `json:"importance,omitempty" jsonschema:"high or urgent (absent: normal)."`
		AckRequired     bool   `json:"ack_required,omitempty" jsonschema:"The sender asks you to acknowledge it (acknowledge_message with its id)."`
		Acked           bool   `json:"acked,omitempty" jsonschema:"You acknowledged it."`
	}
	listPeersIn struct{}
	peersIn     struct {
		MeshSlug string `json:"mesh_slug,omitempty" jsonschema:"Only this mesh's peers (upstream claudemesh's argument). A session is on one mesh: give its slug, as list_peers' mesh shows it, or omit it."`
	}
	listPeersOut struct {
		Mesh     string       `json:"mesh" jsonschema:"The mesh you are on."`
		You      string       `json:"you" jsonschema:"Your own display name."`
		Peers    []peerOut    `json:"peers" jsonschema:"Everyone on the mesh, you included: peers online, and members who are away (status offline; messages to them wait)."`
		Machines []machineOut `json:"machines" jsonschema:"The machines on the mesh: each one's claudemesh daemon, which the agents of that machine speak through (not an agent)."`
	}
	machineOut struct {
		Name        string `json:"name" jsonschema:"The daemon's member name on the mesh."`
		Pubkey      string `json:"pubkey" jsonschema:"The member's key: a direct message to it lands in that machine's daemon inbox, read by no agent."`
		Host        string `json:"host,omitempty" jsonschema:"The machine's host name."`
		ThisMachine bool   `json:"this_machine" jsonschema:"This is the machine you run on."`
	}
	peerOut struct {
		Name    string `json:"name" jsonschema:"Display name: send_message takes it as to."`
		Pubkey  string `json:"pubkey" jsonschema:"The peer's key."`
		Status  string `json:"status,omitempty" jsonschema:"idle, working or dnd (do not disturb)."`
		Summary string `json:"summary,omitempty" jsonschema:"What the peer says it is doing."`
		You     bool   `json:"you" jsonschema:"This is you."`
	}
	setStatusIn struct {
		Status  string  `json:"status,omitempty" jsonschema:"idle, working, or dnd (do not disturb: peers should not expect a quick answer)."`
		Summary *string `json:"summary,omitempty" jsonschema:"One line on what you are doing, shown to peers by list_peers; an empty string clears it."`
	}
	setStatusOut struct {
		Applied []string `json:"applied" jsonschema:"The fields that were set."`
	}
)

// checkMessagesDefault and checkMessagesMax bound check_messages' limit.
const (
	checkMessagesDefault = 20
	checkMessagesMax     = 100
)

// schemaOf is T's JSON schema with tweak applied to its properties.
func schemaOf[T any](tweak func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(err) // the argument types are fixed: a failure is a bug
	}
	if tweak != nil {
		tweak(s.Properties)
	}
	return s
}

// sendMessageSchema is send_message's input schema.
func sendMessageSchema() *jsonschema.Schema {
	return schemaOf[sendMessageIn](func(p map[string]*jsonschema.Schema) {
		p["to"] = recipientsSchema(p["to"].Description)
		p["message"].MinLength = jsonschema.Ptr(1)
		p["message"].MaxLength = jsonschema.Ptr(messages.MaxMessageBytes)
		p["priority"].Enum = []any{"now", "next", "low"}
		p["client_message_id"].Pattern = `^[!-~]{1,128}$`
		p["reply_to_id"].Pattern = `^[!-~]{1,128}$`
		p["thread_id"].Pattern = `^[!-~]{1,128}$`
		p["subject"].MaxLength = jsonschema.Ptr(messages.MaxSubjectBytes)
		p["importance"].Enum = []any{messages.ImportanceNormal, messages.ImportanceHigh, messages.ImportanceUrgent}
	})
}

func (m *mcpServer) addTools() {
	addTool(m.tools, &mcp.Tool{
		Name:  "send_message",
		Title: "Send a message",
		Description: "Send a message to another agent on the mesh: a peer by display name or pubkey, a #topic, an @group, or * for everyone. " +
			"The message is stored durably and delivered even if the network is briefly down. Returns its client_message_id and, " +
			"for a direct message, whether the recipient is online now and whether it is busy. A recipient that is working (in " +
			"the middle of a turn) or set dnd is interrupted only by priority now: a next or low message waits until its turn " +
			"ends, unless it calls check_messages first.",
		InputSchema: sendMessageSchema(),
	}, m.sendMessage)
	addTool(m.tools, &mcp.Tool{
		Name:  "check_messages",
		Title: "Check messages",
		Description: "Read the messages peers sent you that you have not read yet, oldest first, with sender, time, topic and text. " +
			"Each message is returned once: after this call it counts as read. Messages held for you while you are working " +
			"(sent with priority next or low during your turn) are included.",
		InputSchema: schemaOf[checkMessagesIn](func(p map[string]*jsonschema.Schema) {
			p["limit"].Minimum = jsonschema.Ptr(1.0)
			p["limit"].Maximum = jsonschema.Ptr(float64(checkMessagesMax))
		}),
	}, m.checkMessages)
	addTool(m.tools, &mcp.Tool{
		Name:  "list_peers",
		Title: "List peers",
		Description: "List the agents on your mesh: display name, pubkey, status and summary, and which one is you; and, apart, the machines " +
			"(each one's claudemesh daemon, not an agent). Use the names with send_message.",
		InputSchema: schemaOf[peersIn](nil),
	}, m.listPeers)
	addTool(m.tools, &mcp.Tool{
		Name:  "set_status",
		Title: "Set your status",
		Description: "Tell peers what you are doing: a status (idle, working or dnd for do not disturb) and/or a one-line summary, " +
			"both shown by list_peers. Give at least one.",
		InputSchema: schemaOf[setStatusIn](func(p map[string]*jsonschema.Schema) {
			p["status"].Enum = []any{"idle", "working", "dnd"}
			p["summary"].MaxLength = jsonschema.Ptr(512)
		}),
	}, m.setStatus)
	m.addTopicTools() // topics.go
	m.addStateTools() // state.go
	m.addSkillTools() // skills.go

	m.addMemoryTools() // memory.go
	m.addLockTools()   // locks.go

	m.addReservationTools() // reservations.go
	m.addMailTools()        // mail.go
	m.addInboxTools()       // fetch.go, reply.go
	m.addPeerTools()        // whois.go
	m.addUpstreamTools()    // upstream.go
	m.addSkillPublishTool() // skill_publish.go
	m.addGuardInstallTool() // guard.go
}

// isDirect reports whether to names a peer (display name, pubkey or
// prefix) rather than a topic, group or everyone.
func isDirect(to string) bool {
	return to != "*" && to[0] != '#' && to[0] != '@'
}

func (m *mcpServer) sendMessage(ctx context.Context, _ *mcp.CallToolRequest, in sendMessageIn) (*mcp.CallToolResult, *sendMessageOut, error) {
	if in.To.list {
		return m.sendToEach(ctx, in) // send_many.go
	}
	s, req, out, err := m.prepareSend(ctx, in, in.To.first(), in.ClientMessageID)
	if err != nil {
		return nil, nil, err
	}
	if err := m.deliverSend(ctx, s, req, out, in.ClientMessageID == ""); err != nil {
		return nil, nil, err
	}
	return textResult(sendSummary(out)), out, nil
}

// prepareSend checks a send of in to one recipient, to, under the
// client_message_id cid ("": a fresh one), and resolves a peer's name:
// the session, the request and the result to fill. Nothing is sent.
func (m *mcpServer) prepareSend(ctx context.Context, in sendMessageIn, to, cid string) (*Session, *messages.SendRequest, *sendMessageOut, error) {
	to = strings.TrimSpace(to)
	if to == "" {
		return nil, nil, nil, errors.New("`to` is empty; nothing was sent: name a peer (list_peers shows them), a #topic, an @group or *")
	}
	if strings.TrimSpace(in.Message) == "" {
		return nil, nil, nil, errors.New("`message` is empty; nothing was sent: give the text to send")
	}
	if cid == "" {
		cid = ulid.Make().String()
	}
	msg := in.Message
	req := &messages.SendRequest{To: to, Message: &msg, Priority: in.Priority, ReplyToID: in.ReplyToID, ClientMessageID: cid,
		Subject: in.Subject, ThreadID: in.ThreadID, Importance: in.Importance, AckRequired: in.AckRequired}
	if isDirect(to) {
		req.To = "*" // checked below, once resolved
	}
	if _, err := req.Validate(); err != nil {
		return nil, nil, nil, argumentError(err)
	}
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, nil, m.toolError(nil, err)
	}
	reg, _ := s.Info()
	out := &sendMessageOut{ClientMessageID: cid, To: to, ResolvedTo: to}
	if isDirect(to) {
		if err := m.resolve(ctx, s, reg.Mesh, out); err != nil {
			return nil, nil, nil, err
		}
	}
	req.To = out.ResolvedTo
	return s, req, out, nil
}

// deliverSend sends req as s and records its status in out; minted says
// that the agent did not give the client_message_id (a failure must name
// it, for the retry).
func (m *mcpServer) deliverSend(ctx context.Context, s *Session, req *messages.SendRequest, out *sendMessageOut, minted bool) error {
	res, err := s.as().Send(ctx, req, "")
	if err != nil && transient(err) && !errors.Is(err, ipc.ErrNoAnswer) { // a daemon that did not answer would keep the agent waiting again
		res, err = s.as().Send(ctx, req, "") // the same client_message_id: never twice
	}
	if err != nil && transient(err) && minted {
		// Whether it was taken is unknown, under an id the agent never saw.
		return fmt.Errorf("%v — this message's client_message_id is %s: pass it when you call again", m.toolError(s, err), req.ClientMessageID)
	}
	if err != nil {
		return m.toolError(s, err)
	}
	switch {
	case res.Duplicate != nil:
		out.Status = "duplicate"
	case res.Accepted != nil:
		out.Status, out.RecipientStatus, out.HeldUntilIdle = res.Accepted.Status, res.Accepted.RecipientStatus, res.Accepted.HeldUntilIdle
	}
	return nil
}

// resolve turns out.To, a display name, pubkey or prefix, into the peer's
// pubkey and says whether it is online, from the peer list the server
// kept (peerCache); a name that list does not resolve is looked up again.
func (m *mcpServer) resolve(ctx context.Context, s *Session, mesh string, out *sendMessageOut) error {
	direct := len(out.To) == 64 && messages.IsHex(out.To)
	var list []messages.Peer
	for _, fresh := range []bool{false, true} {
		peers, err := m.peers.get(ctx, s, fresh)
		if err != nil {
			return m.toolError(s, err)
		}
		list = make([]messages.Peer, len(peers))
		for i := range peers {
			list[i] = peers[i].Peer
		}
		if direct {
			out.ResolvedTo = strings.ToLower(out.To)
			break
		}
		key, err := messages.ResolvePeer(out.To, mesh, list)
		if err == nil {
			out.ResolvedTo = key
			break
		}
		if fresh {
			return fmt.Errorf("%v; nothing was sent: call list_peers to see who is online", err)
		}
	}
	online := false
	for _, p := range list {
		if strings.EqualFold(p.Pubkey, out.ResolvedTo) {
			// The broker's directory lists members who are away too.
			online, out.RecipientName = p.PeerRole != messages.PeerRoleMember, p.DisplayName
			break
		}
	}
	out.RecipientOnline = &online
	return nil
}

// peerCache is the session's last peer list: send_message needs one for
// every direct message (a name's key, whether the recipient is online),
// and reads it from the broker at most every peerCacheTTL. list_peers
// always asks.
type peerCache struct {
	mu    sync.Mutex
	s     *Session
	at    time.Time
	peers []ipc.MeshPeer
}

const peerCacheTTL = 2 * time.Second

// get is s's peer list: the one kept, unless fresh or it is older than
// peerCacheTTL or another session's.
func (c *peerCache) get(ctx context.Context, s *Session, fresh bool) ([]ipc.MeshPeer, error) {
	c.mu.Lock()
	if !fresh && c.s == s && time.Since(c.at) < peerCacheTTL {
		peers := c.peers
		c.mu.Unlock()
		return peers, nil
	}
	c.mu.Unlock()
	peers, err := sessionPeers(ctx, s)
	if err == nil {
		c.mu.Lock()
		c.s, c.at, c.peers = s, time.Now(), peers
		c.mu.Unlock()
	}
	return peers, err
}

func sendSummary(out *sendMessageOut) string {
	target := out.To
	if out.ResolvedTo != out.To {
		target = fmt.Sprintf("%s (%.16s…)", out.To, out.ResolvedTo)
	}
	var b strings.Builder
	switch out.Status {
	case "duplicate":
		fmt.Fprintf(&b, "Already delivered earlier: message %s to %s was sent before, and is not sent twice.", out.ClientMessageID, target)
	default:
		fmt.Fprintf(&b, "Sent to %s (client_message_id %s, %s).", target, out.ClientMessageID, out.Status)
	}
	if out.RecipientOnline != nil && !*out.RecipientOnline {
		b.WriteString(" The recipient is not online now; the message is delivered when it connects.")
	}
	if out.RecipientStatus != "" {
		b.WriteString(busySentence(out))
	}
	return b.String()
}

// busySentence says what a busy recipient's status means for the message.
func busySentence(out *sendMessageOut) string {
	status := "is working (in the middle of a turn)"
	if out.RecipientStatus == messages.StatusDND {
		status = "set do not disturb"
	}
	if !out.HeldUntilIdle {
		return " The recipient " + status + "; priority now interrupts it with this message."
	}
	return " The recipient " + status + ": the message waits until it is idle again, unless it checks its messages first; " +
		"send with priority now to interrupt it."
}

func (m *mcpServer) setStatus(ctx context.Context, _ *mcp.CallToolRequest, in setStatusIn) (*mcp.CallToolResult, *setStatusOut, error) {
	if in.Status == "" && in.Summary == nil {
		return nil, nil, errors.New("give a status (idle, working or dnd), a summary, or both; nothing was changed")
	}
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	req := &messages.SetProfile{Summary: in.Summary}
	if in.Status != "" {
		req.Status = &in.Status
	}
	res, err := s.as().SetProfile(ctx, req)
	if err != nil {
		return nil, nil, m.toolError(s, err)
	}
	out := &setStatusOut{Applied: res.Applied}
	if out.Applied == nil {
		out.Applied = []string{}
	}
	var parts []string
	if in.Status != "" {
		parts = append(parts, "status "+in.Status)
	}
	if in.Summary != nil {
		if *in.Summary == "" {
			parts = append(parts, "summary cleared")
		} else {
			parts = append(parts, fmt.Sprintf("summary %q", *in.Summary))
		}
	}
	return textResult("Peers now see your " + strings.Join(parts, " and ") + "."), out, nil
}

// textResult is a result whose text the agent reads; the structured
// content is added from the tool's typed output.
func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// transient reports a failure of the connection mid-request (not a refusal
// by the daemon, nor no daemon at all): the outcome is unknown.
func transient(err error) bool {
	var me *messages.Error
	var ce *ipc.SendConflictError
	return !errors.As(err, &me) && !errors.As(err, &ce) && !errors.Is(err, ipc.ErrDaemonNotRunning) && !errors.Is(err, context.Canceled)
}

// plural is one or many, for n of a thing.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
