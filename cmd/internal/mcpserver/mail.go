package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/messages"
)

// The mail tools: acknowledgements, search, threads, and the lists of
// what waits for an acknowledgement either way. send_message carries the
// mail header (subject, thread, importance, ack_required).
type (
	ackMessageIn struct {
		ID string `json:"id" jsonschema:"The message's id, as check_messages, search_messages or get_thread show it."`
	}
	ackMessageOut struct {
		ID              string `json:"id" jsonschema:"The message acknowledged."`
		ClientMessageID string `json:"client_message_id" jsonschema:"Its sender's client_message_id."`
		AckedAt         string `json:"acked_at" jsonschema:"When you first acknowledged it (RFC 3339)."`
		Receipt         string `json:"receipt" jsonschema:"The receipt to the sender: queued or inflight (on its way), or duplicate (sent before: acknowledging again sends nothing more)."`
	}
	searchMessagesIn struct {
		Query string `json:"query" jsonschema:"The words to look for in the subjects and texts of the messages you received. Every word is asked for first, any word when no message has them all; the exact phrase ranks first."`
		Limit int    `json:"limit,omitempty" jsonschema:"At most this many messages, 1-100 (default 20)."`
	}
	messageList struct {
		Messages []inboxMessage `json:"messages" jsonschema:"The messages."`
	}
	getThreadIn struct {
		ThreadID string `json:"thread_id" jsonschema:"The thread's id: a message's thread_id, or the client_message_id of the message that started it."`
	}
	getThreadOut struct {
		ThreadID string         `json:"thread_id" jsonschema:"The thread."`
		Received []inboxMessage `json:"received" jsonschema:"The messages you received in it, oldest first."`
		Sent     []sentMessage  `json:"sent" jsonschema:"The messages you sent in it, oldest first (their text is sealed in the outbox: subject, recipient and state only)."`
	}
	sentMessage struct {
		ClientMessageID string   `json:"client_message_id" jsonschema:"Its client_message_id."`
		To              string   `json:"to" jsonschema:"Whom it went to (pubkey, #topic, @group or *)."`
		ToName          string   `json:"to_name,omitempty" jsonschema:"The recipient's display name, when the mesh's peer list names its key."`
		Subject         string   `json:"subject,omitempty" jsonschema:"Its subject."`
		Status          string   `json:"status" jsonschema:"pending, inflight, done (the broker took it), dead or aborted."`
		SentAt          string   `json:"sent_at" jsonschema:"When it was sent (RFC 3339)."`
		AckRequired     bool     `json:"ack_required,omitempty" jsonschema:"It asked for an acknowledgement."`
		AckedBy         []string `json:"acked_by,omitempty" jsonschema:"Who acknowledged it."`
		Refused         []string `json:"refused,omitempty" jsonschema:"What recipients' contact policies did with it, in words: held as a contact request until when, refused and why, or accepted; each naming the recipient."`
		Body            string   `json:"body,omitempty" jsonschema:"The text you sent (get_thread only)."`
		awaiting        bool     // it may still be acknowledged (messages.OutboxItem.AwaitsAck)
	}
	listUnacknowledgedIn struct {
		Limit int `json:"limit,omitempty" jsonschema:"At most this many, 1-100 (default 20)."`
	}
	listAwaitingAcksIn struct {
		OlderThanSeconds int `json:"older_than_seconds,omitempty" jsonschema:"Only those sent longer ago than this many seconds (default 0: all)."`
	}
	sentList struct {
		Messages []sentMessage `json:"messages" jsonschema:"Your messages waiting for an acknowledgement, newest first."`
	}
)

func (m *mcpServer) addMailTools() {
	addTool(m.tools, &mcp.Tool{Name: "acknowledge_message", Title: "Acknowledge a message",
		Description: "Acknowledge a message you received (by its id): a receipt goes back to its sender, who sees who acknowledged " +
			"it and when. Do it when a message asks for an acknowledgement (ack_required), once you have read or done what it asks. " +
			"Acknowledging again sends nothing more.",
		InputSchema: schemaOf[ackMessageIn](func(p map[string]*jsonschema.Schema) { p["id"].MinLength = jsonschema.Ptr(1) }),
	}, m.ackMessage)
	addTool(m.tools, &mcp.Tool{Name: "search_messages", Title: "Search messages",
		Description: "Search the messages you received by the words of their subject and text, best match first. It does not mark them read.",
		InputSchema: schemaOf[searchMessagesIn](func(p map[string]*jsonschema.Schema) {
			p["query"].MinLength, p["query"].MaxLength = jsonschema.Ptr(1), jsonschema.Ptr(messages.MaxSearchQueryBytes)
			p["limit"].Minimum, p["limit"].Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(float64(messages.MaxSearchLimit))
		}),
	}, m.searchMessages)
	addTool(m.tools, &mcp.Tool{Name: "get_thread", Title: "Read a thread",
		Description: "Read a conversation: the messages you received in a thread and those you sent in it, oldest first. " +
			"Answer in it with send_message and thread_id (or reply_to_id).",
		InputSchema: schemaOf[getThreadIn](func(p map[string]*jsonschema.Schema) { p["thread_id"].Pattern = `^[!-~]{1,128}$` }),
	}, m.getThread)
	addTool(m.tools, &mcp.Tool{Name: "list_unacknowledged", Title: "Messages to acknowledge",
		Description: "List the messages you received that ask for an acknowledgement you have not given yet (acknowledge_message gives it).",
		InputSchema: schemaOf[listUnacknowledgedIn](func(p map[string]*jsonschema.Schema) {
			p["limit"].Minimum, p["limit"].Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(100.0)
		}),
	}, m.listUnacknowledged)
	addTool(m.tools, &mcp.Tool{Name: "list_awaiting_acks", Title: "My messages awaiting acknowledgement",
		Description: "List the messages you sent with ack_required that no recipient has acknowledged yet (older than older_than_seconds).",
		InputSchema: schemaOf[listAwaitingAcksIn](func(p map[string]*jsonschema.Schema) {
			p["older_than_seconds"].Minimum = jsonschema.Ptr(0.0)
		}),
	}, m.listAwaitingAcks)
	m.addContactTools() // contacts.go
}

// mailError is the sentence for a failed mail request, naming the tools
// that help where the daemon's detail names its routes.
func (m *mcpServer) mailError(s *Session, err error) error {
	var me *messages.Error
	if !errors.As(err, &me) || me.Status != 404 && me.Status != 409 {
		return m.toolError(s, err)
	}
	switch me.Code {
	case messages.CodeInboxRowNotFound:
		return errors.New("no such message in your inbox; nothing was changed: give the id that check_messages or " +
			"list_unacknowledged shows for it")
	case messages.CodeMessageHeld:
		return errors.New("that message waits in a contact request from a stranger; nothing was changed: accept the request " +
			"first (list_contacts shows it, answer_contact_request accepts it), then acknowledge the message")
	case messages.CodeNoContactRequest:
		return errors.New("no pending contact request from that peer; nothing was changed: list_contacts shows the pending requests")
	}
	return fmt.Errorf("%s; nothing was changed", agentDetail(s, me.Detail))
}

func (m *mcpServer) ackMessage(ctx context.Context, _ *mcp.CallToolRequest, in ackMessageIn) (*mcp.CallToolResult, *ackMessageOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	res, err := s.as().AckMessage(ctx, strings.TrimSpace(in.ID))
	if err != nil {
		return nil, nil, m.mailError(s, err)
	}
	out := &ackMessageOut{ID: res.ID, ClientMessageID: res.ClientMessageID, AckedAt: res.AckedAt, Receipt: res.ReceiptStatus}
	text := fmt.Sprintf("Acknowledged message %s; the receipt to its sender is %s.", res.ID, res.ReceiptStatus)
	if res.ReceiptStatus == "duplicate" {
		text = fmt.Sprintf("Message %s was already acknowledged (at %s); nothing more was sent.", res.ID, res.AckedAt)
	}
	return textResult(text), out, nil
}

func (m *mcpServer) searchMessages(ctx context.Context, _ *mcp.CallToolRequest, in searchMessagesIn) (*mcp.CallToolResult, *messageList, error) {
	if len(messages.SearchTerms(in.Query, 1)) == 0 {
		return nil, nil, errors.New("`query` has no word to search for: give some words of the subject or text")
	}
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	page, err := s.as().SearchInbox(ctx, in.Query, "", cmp.Or(in.Limit, messages.DefaultSearchLimit))
	if err != nil {
		return nil, nil, m.toolError(s, err)
	}
	out, text := listMessages(page.Items, fmt.Sprintf("No message matches %s.", quoteArg(in.Query)), "best match first")
	return textResult(text), out, nil
}

// listMessages renders items for the agent: the structured list and its
// text (empty: when there is none; order: what the list is sorted by).
func listMessages(items []messages.InboxItem, empty, order string) (*messageList, string) {
	out := &messageList{Messages: make([]inboxMessage, 0, len(items))}
	if len(items) == 0 {
		return out, empty
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %s:\n", count(len(items), "message", "messages"), order)
	for i := range items {
		out.Messages = append(out.Messages, toInboxMessage(&items[i]))
		b.WriteString("\n" + formatMessage(&items[i]) + "\n")
	}
	return out, b.String()
}

func (m *mcpServer) getThread(ctx context.Context, _ *mcp.CallToolRequest, in getThreadIn) (*mcp.CallToolResult, *getThreadOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	q := url.Values{"thread": {in.ThreadID}, "mark_seen": {"false"}, "limit": {"1000"}}
	received, err := s.as().Inbox(ctx, q)
	if err != nil {
		return nil, nil, m.toolError(s, err)
	}
	sent, err := s.as().Outbox(ctx, url.Values{"thread": {in.ThreadID}, "limit": {"500"}})
	if err != nil {
		return nil, nil, m.toolError(s, err)
	}
	slices.Reverse(sent.Items)
	out := &getThreadOut{ThreadID: in.ThreadID, Received: make([]inboxMessage, 0, len(received.Items)),
		Sent: make([]sentMessage, 0, len(sent.Items))}
	// The text has both kinds in one conversation, oldest first.
	type entry struct {
		at   time.Time
		text string
	}
	entries := make([]entry, 0, len(received.Items)+len(sent.Items))
	for i := range received.Items {
		it := &received.Items[i]
		out.Received = append(out.Received, toInboxMessage(it))
		entries = append(entries, entry{rfc3339(it.ReceivedAt), formatMessage(it)})
	}
	names := s.as().PeerNames(ctx, "", len(sent.Items)) // the session's peers
	for i := range sent.Items {
		sm := toSentMessage(&sent.Items[i], names)
		out.Sent = append(out.Sent, sm)
		entries = append(entries, entry{rfc3339(sm.SentAt), formatSent(&sm)})
	}
	if len(entries) == 0 {
		return textResult(fmt.Sprintf("No message in thread %s: a thread's id is a message's thread_id, or the client_message_id "+
			"of the message that started it.", in.ThreadID)), out, nil
	}
	slices.SortStableFunc(entries, func(a, b entry) int { return a.at.Compare(b.at) })
	var b strings.Builder
	fmt.Fprintf(&b, "Thread %s: %d received, %d sent, oldest first.\n", in.ThreadID, len(received.Items), len(sent.Items))
	for _, e := range entries {
		b.WriteString("\n" + e.text + "\n")
	}
	return textResult(b.String()), out, nil
}

// rfc3339 is the time the daemon wrote; the zero time if it is not one.
func rfc3339(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

func toSentMessage(it *messages.OutboxItem, names map[string]string) sentMessage {
	sm := sentMessage{ClientMessageID: it.ClientMessageID, To: it.To, ToName: names[strings.ToLower(it.To)], Subject: it.Subject,
		Status: it.Status, SentAt: it.EnqueuedAt, AckRequired: it.AckRequired, awaiting: it.AwaitsAck()}
	if it.Body != nil {
		sm.Body = *it.Body
	}
	for _, a := range it.AckedBy {
		sm.AckedBy = append(sm.AckedBy, cmp.Or(a.Name, a.Pubkey))
	}
	for _, r := range it.Receipts {
		sm.Refused = append(sm.Refused, r.Describe())
	}
	return sm
}

// formatSent is one sent message as the agent reads it.
func formatSent(sm *sentMessage) string {
	to := fmt.Sprintf("%.16s…", sm.To)
	switch {
	case len(sm.To) < 64: // a #topic, @group or *
		to = sm.To
	case sm.ToName != "":
		to = fmt.Sprintf("%s (%.16s…)", sm.ToName, sm.To)
	}
	line := fmt.Sprintf("You sent %s to %s at %s (%s)", sm.ClientMessageID, to, sm.SentAt, sm.Status)
	if sm.Subject != "" {
		line += ", subject " + strconv.Quote(sm.Subject)
	}
	switch {
	case len(sm.AckedBy) > 0:
		line += ", acknowledged by " + strings.Join(sm.AckedBy, ", ")
	case sm.awaiting:
		line += ", awaiting acknowledgement"
	}
	if len(sm.Refused) > 0 {
		line += "; " + strings.Join(sm.Refused, ", ")
	}
	if sm.Body != "" {
		line += ":\n" + sm.Body
	}
	return line
}

func (m *mcpServer) listUnacknowledged(ctx context.Context, _ *mcp.CallToolRequest, in listUnacknowledgedIn) (*mcp.CallToolResult, *messageList, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	page, err := s.as().Inbox(ctx, url.Values{"unacked": {"true"}, "mark_seen": {"false"},
		"limit": {strconv.Itoa(cmp.Or(in.Limit, checkMessagesDefault))}})
	if err != nil {
		return nil, nil, m.toolError(s, err)
	}
	out, text := listMessages(page.Items, "No message waits for your acknowledgement.", "oldest first; acknowledge each with acknowledge_message")
	return textResult(text), out, nil
}

func (m *mcpServer) listAwaitingAcks(ctx context.Context, _ *mcp.CallToolRequest, in listAwaitingAcksIn) (*mcp.CallToolResult, *sentList, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	older := time.Duration(in.OlderThanSeconds) * time.Second
	page, err := s.as().Outbox(ctx, url.Values{"awaiting_ack": {"true"}, "older_than": {older.String()}, "limit": {"100"}})
	if err != nil {
		return nil, nil, m.toolError(s, err)
	}
	out := &sentList{Messages: make([]sentMessage, 0, len(page.Items))}
	if len(page.Items) == 0 {
		return textResult("None of your messages is waiting for an acknowledgement."), out, nil
	}
	var b strings.Builder
	if len(page.Items) == 1 {
		b.WriteString("1 of your messages awaits an acknowledgement:\n")
	} else {
		fmt.Fprintf(&b, "%d of your messages await an acknowledgement, newest first:\n", len(page.Items))
	}
	names := s.as().PeerNames(ctx, "", len(page.Items))
	for i := range page.Items {
		sm := toSentMessage(&page.Items[i], names)
		out.Messages = append(out.Messages, sm)
		b.WriteString("\n" + formatSent(&sm) + "\n")
	}
	return textResult(b.String()), out, nil
}
