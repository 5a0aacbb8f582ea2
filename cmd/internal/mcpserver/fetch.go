package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/messages"
)

// The inbox tools beside check_messages: fetch_inbox lists without
// marking anything read (Agent Mail's fetch_inbox), mark_read marks what
// the agent has read, reply_message answers a message (reply.go).
type (
	fetchInboxIn struct {
		Limit       int    `json:"limit,omitempty" jsonschema:"At most this many messages, 1-1000 (default 20); next_cursor reads on."`
		Since       string `json:"since,omitempty" jsonschema:"Only the messages received after this time (RFC 3339, as received_at shows it), read or not: pass the received_at of the last message you saw to read on from there."`
		UrgentOnly  bool   `json:"urgent_only,omitempty" jsonschema:"Only the messages of importance high or urgent."`
		Topic       string `json:"topic,omitempty" jsonschema:"Only the messages sent to this topic: its name (with or without #) or id; @group for a group's, * for those sent to everyone."`
		IncludeRead bool   `json:"include_read,omitempty" jsonschema:"List the messages you read already too (without since, only the unread ones are listed)."`
		Cursor      string `json:"cursor,omitempty" jsonschema:"The next_cursor of a previous call, to read the following messages (give the same filters)."`
		// headersOnly leaves the texts out (Agent Mail's include_bodies
		// false).
		headersOnly bool
	}
	fetchInboxOut struct {
		Messages   []fetchedMessage `json:"messages" jsonschema:"The messages, oldest first. None is marked read: mark_read does it."`
		NextCursor string           `json:"next_cursor,omitempty" jsonschema:"More messages match: call fetch_inbox again with this cursor and the same filters."`
	}
	fetchedMessage struct {
		inboxMessage
		Read bool `json:"read" jsonschema:"You had read it before this call (check_messages, mark_read, or a message pushed to you)."`
	}
	markReadIn struct {
		IDs []string `json:"ids" jsonschema:"The ids of the messages you read, as fetch_inbox or check_messages show them."`
	}
	markReadOut struct {
		Marked int `json:"marked" jsonschema:"How many of them were unread and are read now (the others were read already, or are not messages of yours)."`
	}
)

// Bounds of fetch_inbox and mark_read (the daemon's: GET /v1/inbox's
// limit, POST /v1/inbox/seen's ids).
const (
	fetchInboxMax = 1000
	markReadMax   = 1000
)

func (m *mcpServer) addInboxTools() {
	addTool(m.tools, &mcp.Tool{Name: "fetch_inbox", Title: "Fetch your inbox",
		Description: "List the messages you received without marking them read, oldest first: the unread ones, or with since every " +
			"message received after that time; urgent_only and topic filter them. Mark what you read with mark_read " +
			"(check_messages lists and marks in one call).",
		InputSchema: schemaOf[fetchInboxIn](func(p map[string]*jsonschema.Schema) {
			p["limit"].Minimum, p["limit"].Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(float64(fetchInboxMax))
			p["since"].MaxLength = jsonschema.Ptr(64)
			p["topic"].MaxLength = jsonschema.Ptr(messages.MaxPeerNameBytes)
			p["cursor"].MaxLength = jsonschema.Ptr(512)
		}),
	}, m.fetchInbox)
	addTool(m.tools, &mcp.Tool{Name: "mark_read", Title: "Mark messages read",
		Description: "Mark messages you received as read, by id: check_messages and fetch_inbox then no longer list them as unread.",
		InputSchema: schemaOf[markReadIn](func(p map[string]*jsonschema.Schema) {
			p["ids"].MinItems, p["ids"].MaxItems = jsonschema.Ptr(1), jsonschema.Ptr(markReadMax)
			p["ids"].Items = &jsonschema.Schema{Type: "string", Pattern: `^[!-~]{1,128}$`}
		}),
	}, m.markRead)
	m.addReplyTool() // reply.go
}

func (m *mcpServer) fetchInbox(ctx context.Context, _ *mcp.CallToolRequest, in fetchInboxIn) (*mcp.CallToolResult, *fetchInboxOut, error) {
	q, err := fetchQuery(in)
	if err != nil {
		return nil, nil, err
	}
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	page, err := m.fetchPage(ctx, s, q)
	if err != nil {
		return nil, nil, m.fetchError(s, err, in.Topic)
	}
	out := &fetchInboxOut{Messages: make([]fetchedMessage, len(page.Items)), NextCursor: page.Next}
	if len(page.Items) == 0 {
		if in.Topic != "" {
			return textResult("No message matches (topic_list shows the mesh's topics)."), out, nil
		}
		return textResult("No message matches."), out, nil
	}
	var b strings.Builder
	n := len(page.Items)
	b.Grow(n * 320) // a message's header and text
	fmt.Fprintf(&b, "%d %s, oldest first (none marked read; mark_read marks them):\n", n, plural(n, "message", "messages"))
	for i := range page.Items {
		it := &page.Items[i]
		if in.headersOnly {
			it.Body = new(string)
		}
		out.Messages[i] = fetchedMessage{inboxMessage: toInboxMessage(it), Read: it.SeenAt != nil}
		b.WriteString("\n" + formatMessage(it))
		if it.SeenAt != nil {
			b.WriteString("\n(read before)")
		}
		b.WriteString("\n")
	}
	if out.NextCursor != "" {
		b.WriteString("\nMore messages match: call fetch_inbox again with cursor " + out.NextCursor + ".")
	}
	return textResult(b.String()), out, nil
}

// fetchPage lists the session's inbox by q, its messages then shown: as
// for check_messages, the pump pushes none of them after (a held message
// this read pulled arrives on the event stream too).
func (m *mcpServer) fetchPage(ctx context.Context, s *Session, q url.Values) (*messages.InboxPage, error) {
	m.shown.reading.Lock()
	defer m.shown.reading.Unlock()
	page, err := s.as().Inbox(ctx, q)
	if err != nil {
		return nil, err
	}
	for i := range page.Items {
		m.shown.add(page.Items[i].ID)
	}
	return page, nil
}

// fetchQuery is fetch_inbox's query of GET /v1/inbox: never marking seen.
func fetchQuery(in fetchInboxIn) (url.Values, error) {
	q := url.Values{"mark_seen": {"false"}, "limit": {strconv.Itoa(cmp.Or(in.Limit, checkMessagesDefault))}}
	if in.Since != "" {
		t, err := parseSince(in.Since)
		if err != nil {
			return nil, err
		}
		// Strictly after: received_at is kept to the millisecond.
		q.Set("since", strconv.FormatInt(t.UnixMilli()+1, 10))
	} else if !in.IncludeRead {
		q.Set("unread_only", "true")
	}
	if in.UrgentOnly {
		q.Set("importance", messages.ImportanceHigh+","+messages.ImportanceUrgent)
	}
	if t := strings.TrimPrefix(strings.TrimSpace(in.Topic), "#"); t != "" {
		q.Set("topic", t)
	}
	if in.Cursor != "" {
		q.Set("after", in.Cursor)
	}
	return q, nil
}

// parseSince reads a since: RFC 3339, or the same without a zone (taken
// as UTC, as Agent Mail's ISO-8601 timestamps may be written).
func parseSince(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02T15:04:05.999999999", s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("since %q is not a time; nothing was read: give it as RFC 3339, e.g. 2026-01-02T15:04:05Z "+
		"(a message's received_at)", clip(s))
}

// fetchError is the sentence for a failed fetch_inbox.
func (m *mcpServer) fetchError(s *Session, err error, topic string) error {
	var me *messages.Error
	switch {
	case errors.As(err, &me) && me.Code == messages.CodeTopicNotFound:
		return fmt.Errorf("your mesh has no topic %q: topic_list shows its topics", clip(topic))
	case errors.As(err, &me) && me.Code == messages.CodeInvalidQuery && strings.Contains(me.Detail, "cursor"):
		return errors.New("cursor is not a next_cursor fetch_inbox returned: call fetch_inbox without it")
	}
	return m.toolError(s, err)
}

func (m *mcpServer) markRead(ctx context.Context, _ *mcp.CallToolRequest, in markReadIn) (*mcp.CallToolResult, *markReadOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	n, err := s.as().MarkSeen(ctx, in.IDs)
	if err != nil {
		return nil, nil, m.toolError(s, err)
	}
	out := &markReadOut{Marked: n}
	text := fmt.Sprintf("Marked %d %s read.", n, plural(n, "message", "messages"))
	if rest := len(in.IDs) - n; rest > 0 {
		text += fmt.Sprintf(" %d of the ids given %s read already, or not one of your messages.", rest, plural(rest, "was", "were"))
	}
	return textResult(text), out, nil
}
