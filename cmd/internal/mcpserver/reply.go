package mcpserver

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/messages"
)

// reply_message: an answer to a message received, sent to its sender in
// its thread, as a send_message with reply_to_id and thread_id would be.
type replyMessageIn struct {
	ID              string      `json:"id" jsonschema:"The id of the message you answer, as check_messages or fetch_inbox show it."`
	Message         string      `json:"message" jsonschema:"Your answer, at most 32 KiB."`
	To              *recipients `json:"to,omitempty" jsonschema:"Whom to answer (default: the message's sender alone), as send_message's to takes it: e.g. the #topic it was sent to, or a list."`
	Subject         string      `json:"subject,omitempty" jsonschema:"A subject line (default: Re: and the message's subject, when it has one)."`
	Priority        string      `json:"priority,omitempty" jsonschema:"How urgent it is: now, next (the default) or low, as send_message's priority."`
	Importance      string      `json:"importance,omitempty" jsonschema:"normal, high or urgent (default: the message's importance)."`
	AckRequired     bool        `json:"ack_required,omitempty" jsonschema:"Ask the recipient to acknowledge your answer."`
	ClientMessageID string      `json:"client_message_id,omitempty" jsonschema:"Idempotency key, as send_message's: to retry a reply whose outcome you did not see, call again with the id it returned."`
	// subjectPrefix goes before the message's subject ("": Re:), Agent
	// Mail's subject_prefix.
	subjectPrefix string
}

func (m *mcpServer) addReplyTool() {
	addTool(m.tools, &mcp.Tool{Name: "reply_message", Title: "Reply to a message",
		Description: "Answer a message you received, by its id: the answer goes to its sender (or to whom you name), in the message's " +
			"thread, with its subject (Re: …) and importance unless you give others. It is a send_message with reply_to_id and thread_id " +
			"filled in.",
		InputSchema: schemaOf[replyMessageIn](func(p map[string]*jsonschema.Schema) {
			p["id"].Pattern = `^[!-~]{1,128}$`
			p["message"].MinLength, p["message"].MaxLength = jsonschema.Ptr(1), jsonschema.Ptr(messages.MaxMessageBytes)
			p["to"] = recipientsSchema(p["to"].Description)
			p["subject"].MaxLength = jsonschema.Ptr(messages.MaxSubjectBytes)
			p["priority"].Enum = []any{"now", "next", "low"}
			p["importance"].Enum = []any{messages.ImportanceNormal, messages.ImportanceHigh, messages.ImportanceUrgent}
			p["client_message_id"].Pattern = `^[!-~]{1,128}$`
		}),
	}, m.replyMessage)
}

func (m *mcpServer) replyMessage(ctx context.Context, req *mcp.CallToolRequest, in replyMessageIn) (*mcp.CallToolResult, *sendMessageOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	it, err := m.received(ctx, s, in.ID)
	if err != nil {
		return nil, nil, err
	}
	send := sendMessageIn{Message: in.Message, Priority: in.Priority, ReplyToID: it.ClientMessageID,
		ClientMessageID: in.ClientMessageID, Subject: in.Subject, ThreadID: cmp.Or(it.ThreadID, it.ClientMessageID),
		Importance: cmp.Or(in.Importance, it.Importance), AckRequired: in.AckRequired}
	if send.To = (recipients{names: []string{it.SenderPubkey}}); in.To != nil {
		send.To = *in.To
	}
	if send.Subject == "" && it.Subject != "" {
		send.Subject = replySubject(cmp.Or(in.subjectPrefix, "Re:"), it.Subject)
	}
	res, out, err := m.sendMessage(ctx, req, send)
	if err != nil {
		return nil, nil, err
	}
	res.Content = []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("Replied to %s's message %s (thread %s). %s",
		cmp.Or(it.SenderName, "(unnamed)"), it.ID, send.ThreadID, resultText(res))}}
	return res, out, nil
}

// received is the session's inbox message of row id id, not marked read.
func (m *mcpServer) received(ctx context.Context, s *Session, id string) (*messages.InboxItem, error) {
	page, err := s.as().Inbox(ctx, url.Values{"id": {id}, "mark_seen": {"false"}, "limit": {"1"}})
	if err != nil {
		return nil, m.toolError(s, err)
	}
	if len(page.Items) == 0 {
		return nil, fmt.Errorf("no message %s in your inbox; nothing was sent: give the id check_messages or fetch_inbox shows", clip(id))
	}
	return &page.Items[0], nil
}

// replySubject is subject with prefix before it, unless it starts with
// it already (in any case), cut to the subject's limit.
func replySubject(prefix, subject string) string {
	if !strings.HasPrefix(strings.ToLower(subject), strings.ToLower(prefix)) {
		subject = prefix + " " + subject
	}
	for len(subject) > messages.MaxSubjectBytes {
		_, size := utf8.DecodeLastRuneInString(subject)
		subject = subject[:len(subject)-size]
	}
	return subject
}

// resultText is a result's text blocks, joined.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}
