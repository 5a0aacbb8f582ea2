package mcpserver

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

func (m *mcpServer) checkMessages(ctx context.Context, _ *mcp.CallToolRequest, in checkMessagesIn) (*mcp.CallToolResult, *checkMessagesOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	out, text, err := m.readUnread(ctx, s, cmp.Or(in.Limit, checkMessagesDefault))
	if err != nil {
		return nil, nil, m.toolError(s, err)
	}
	return textResult(text), out, nil
}

// readUnread reads up to limit of the session's unread messages, oldest
// first, and marks them read: the tool's result and its text. They are
// then shown: the pump pushes none of them after (a held message pulled
// by this read arrives on the event stream too).
func (m *mcpServer) readUnread(ctx context.Context, s *Session, limit int) (*checkMessagesOut, string, error) {
	m.shown.reading.Lock()
	defer m.shown.reading.Unlock()
	page, err := s.as().Inbox(ctx, url.Values{"unread_only": {"true"}, "mark_seen": {"true"}, "limit": {strconv.Itoa(limit)}})
	if err != nil {
		return nil, "", err
	}
	page.Items = slices.DeleteFunc(page.Items, func(it messages.InboxItem) bool { return m.pushed.holds(it.ID) })
	for i := range page.Items {
		m.shown.add(page.Items[i].ID)
	}
	out := &checkMessagesOut{Messages: make([]inboxMessage, 0, len(page.Items)), More: page.Next != ""}
	for i := range page.Items {
		out.Messages = append(out.Messages, toInboxMessage(&page.Items[i]))
	}
	if len(out.Messages) == 0 {
		return out, "No unread messages.", nil
	}
	var b strings.Builder
	if len(out.Messages) == 1 {
		b.WriteString("1 unread message:\n")
	} else {
		fmt.Fprintf(&b, "%d unread messages, oldest first:\n", len(out.Messages))
	}
	for i := range page.Items {
		b.WriteString("\n")
		b.WriteString(formatMessage(&page.Items[i]))
		b.WriteString("\n")
	}
	if out.More {
		b.WriteString("\nMore unread messages are waiting: call check_messages again.")
	}
	return out, b.String(), nil
}

func toInboxMessage(it *messages.InboxItem) inboxMessage {
	return inboxMessage{ID: it.ID, From: it.SenderName, FromPubkey: it.SenderPubkey, Kind: it.Kind, Topic: string(it.Topic), TopicName: it.TopicName,
		Body: bodyText(it), ReceivedAt: it.ReceivedAt, ReplyToID: string(it.ReplyToID), ClientMessageID: it.ClientMessageID,
		Subject: it.Subject, ThreadID: it.ThreadID, Importance: it.Importance, AckRequired: it.AckRequired, Acked: it.AckedAt != nil}
}

// bodyText is a message's text, or a note when it could not be decrypted.
func bodyText(it *messages.InboxItem) string {
	if it.Body == nil {
		return "(this message could not be decrypted)"
	}
	return *it.Body
}

// formatMessage is one message as the agent reads it: a header line (who,
// when, where, its id) and the text.
func formatMessage(it *messages.InboxItem) string {
	from := cmp.Or(it.SenderName, "(unnamed)")
	when := it.ReceivedAt
	if t, err := time.Parse(time.RFC3339Nano, it.ReceivedAt); err == nil {
		when = t.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	where := "direct message"
	if it.Kind != "dm" {
		where = "to " + topicLabel(cmp.Or(it.TopicName, string(it.Topic)))
	}
	head := fmt.Sprintf("From %s (%.16s…) at %s, %s, id %s", from, it.SenderPubkey, when, where, it.ID)
	if it.ReplyToID != "" {
		head += ", in reply to " + string(it.ReplyToID)
	}
	head += mailHead(it)
	return head + ":\n" + bodyText(it)
}

// mailHead is what a message's mail header adds to its header line.
func mailHead(it *messages.InboxItem) string {
	var b strings.Builder
	if it.ThreadID != "" {
		b.WriteString(", thread " + it.ThreadID)
	}
	if it.Importance != "" && it.Importance != messages.ImportanceNormal {
		b.WriteString(", importance " + it.Importance)
	}
	switch {
	case it.AckRequired && it.HeldUntil != nil:
		b.WriteString(", asks for an acknowledgement (acknowledge_message, once you accept the request)")
	case it.AckRequired && it.AckedAt == nil:
		b.WriteString(", asks for an acknowledgement (acknowledge_message)")
	case it.AckRequired:
		b.WriteString(", acknowledged")
	}
	if it.Subject != "" {
		b.WriteString(", subject " + strconv.Quote(it.Subject))
	}
	return b.String()
}

// topicLabel is how a topic message's destination reads: #topic, @group or
// everyone.
func topicLabel(topic string) string {
	switch {
	case topic == "" || topic == "*":
		return "everyone"
	case strings.HasPrefix(topic, "@") || strings.HasPrefix(topic, "#"):
		return topic
	}
	return "#" + topic
}

func (m *mcpServer) listPeers(ctx context.Context, _ *mcp.CallToolRequest, in peersIn) (*mcp.CallToolResult, *listPeersOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	reg, _ := s.Info()
	if err := onMesh(in.MeshSlug, reg.Mesh); err != nil { // upstream.go
		return nil, nil, err
	}
	peers, err := m.peers.get(ctx, s, true)
	if err != nil {
		return nil, nil, m.toolError(s, err)
	}
	out := peersOut(s, peers)
	var b strings.Builder
	fmt.Fprintf(&b, "Peers on mesh %s (you are %s; a peer whose status is offline is away, and messages to it wait):\n", out.Mesh, out.You)
	if len(out.Peers) == 0 {
		b.WriteString("(none)\n")
	}
	for _, p := range out.Peers {
		fmt.Fprintf(&b, "- %s (%.16s…)", cmp.Or(p.Name, "(unnamed)"), p.Pubkey)
		if p.You {
			b.WriteString(" [you]")
		}
		if p.Status != "" {
			b.WriteString(" " + p.Status)
		}
		if p.Summary != "" {
			b.WriteString(": " + p.Summary)
		}
		b.WriteString("\n")
	}
	for _, h := range out.Machines {
		fmt.Fprintf(&b, "Machine %s: its daemon %s (%.16s…)", cmp.Or(h.Host, "(unnamed host)"), h.Name, h.Pubkey)
		if h.ThisMachine {
			b.WriteString(" [this machine]")
		}
		b.WriteString("\n")
	}
	return textResult(b.String()), out, nil
}

// peersOut is list_peers' result from the session's peer list: one line
// per key (a member may have several presences), the daemons (a
// machine's control-plane connection) apart from the agents.
func peersOut(s *Session, peers []ipc.MeshPeer) *listPeersOut {
	reg, me := s.Info()
	out := &listPeersOut{Mesh: reg.Mesh, You: reg.DisplayName, Peers: make([]peerOut, 0, len(peers)), Machines: []machineOut{}}
	var member string // the session's member: this machine's daemon
	for _, p := range peers {
		if strings.EqualFold(p.Pubkey, me) {
			member = p.MemberPubkey
		}
	}
	for _, p := range peers {
		key := strings.ToLower(p.Pubkey)
		if key == "" || slices.ContainsFunc(out.Peers, func(q peerOut) bool { return q.Pubkey == key }) ||
			slices.ContainsFunc(out.Machines, func(h machineOut) bool { return h.Pubkey == key }) {
			continue
		}
		if p.Channel == messages.ChannelDaemon && p.PeerRole != messages.PeerRoleMember && p.PeerRole != "session" {
			out.Machines = append(out.Machines, machineOut{Name: p.DisplayName, Pubkey: key, Host: p.Hostname,
				ThisMachine: member != "" && strings.EqualFold(p.Pubkey, member)})
			continue
		}
		out.Peers = append(out.Peers, peerOut{Name: p.DisplayName, Pubkey: key, Status: p.Status, Summary: p.Summary,
			You: strings.EqualFold(p.Pubkey, me)})
	}
	return out
}

// sessionPeers is the session's peer list, waiting for a connection that
// is not up yet (ipc.WhenLinked).
func sessionPeers(ctx context.Context, s *Session) ([]ipc.MeshPeer, error) {
	return ipc.WhenLinked(ctx, func() ([]ipc.MeshPeer, error) { return s.as().Peers(ctx, "") })
}
