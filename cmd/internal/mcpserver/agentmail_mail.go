package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/messages"
)

// The Agent Mail set's messaging tools, mapped onto send_message,
// reply_message, fetch_inbox, mark_read, acknowledge_message,
// search_messages and topic_history.
type (
	amSendIn struct {
		amProject
		amSender
		To                   []string `json:"to,omitempty" jsonschema:"The recipients: agents' display names (list_peers shows them) or pubkeys, or claudemesh's #topic, @group or *. Each gets a message of its own."`
		Subject              string   `json:"subject,omitempty" jsonschema:"A subject line, at most 200 bytes."`
		BodyMD               string   `json:"body_md" jsonschema:"The text (Markdown, sent as it is), at most 32 KiB."`
		CC                   []string `json:"cc,omitempty" jsonschema:"More recipients, sent the message as to's are (recipients are not told who else got it)."`
		BCC                  []string `json:"bcc,omitempty" jsonschema:"More recipients, sent the message as to's are."`
		AttachmentPaths      []string `json:"attachment_paths,omitempty" jsonschema:"Agent Mail's attachments: claudemesh messages carry none, and a send with any is refused."`
		ConvertImages        *bool    `json:"convert_images,omitempty" jsonschema:"Agent Mail's image conversion: taken, not used."`
		Importance           string   `json:"importance,omitempty" jsonschema:"low, normal (the default), high or urgent. low goes as claudemesh's priority low (read whenever convenient), the others as its importance."`
		AckRequired          bool     `json:"ack_required,omitempty" jsonschema:"Ask the recipients to acknowledge it (acknowledge_message)."`
		ThreadID             string   `json:"thread_id,omitempty" jsonschema:"The thread it belongs to."`
		Broadcast            bool     `json:"broadcast,omitempty" jsonschema:"Send it to every agent of the mesh (claudemesh's *)."`
		Topic                string   `json:"topic,omitempty" jsonschema:"Agent Mail's topic tag: claudemesh has no tags (its topics are channels: send to #name); not kept."`
		AutoContactIfBlocked *bool    `json:"auto_contact_if_blocked,omitempty" jsonschema:"Agent Mail's automatic contact request: here a message to a contacts_only recipient waits as a contact request by itself; taken, not used."`
		amFormat
	}
	amReplyIn struct {
		amProject
		amSender
		MessageID     string   `json:"message_id" jsonschema:"The id of the message you answer, as fetch_inbox shows it."`
		BodyMD        string   `json:"body_md" jsonschema:"Your answer (Markdown, sent as it is), at most 32 KiB."`
		To            []string `json:"to,omitempty" jsonschema:"Whom to answer (default: the message's sender)."`
		CC            []string `json:"cc,omitempty" jsonschema:"More recipients, sent the answer as to's are."`
		BCC           []string `json:"bcc,omitempty" jsonschema:"More recipients, sent the answer as to's are."`
		SubjectPrefix string   `json:"subject_prefix,omitempty" jsonschema:"What goes before the message's subject (default Re:), unless it is there already."`
		amFormat
	}
	amFetchInboxIn struct {
		amProject
		amAgent
		Limit         int    `json:"limit,omitempty" jsonschema:"At most this many messages, 1-1000 (default 20)."`
		UrgentOnly    bool   `json:"urgent_only,omitempty" jsonschema:"Only the messages of importance high or urgent."`
		IncludeBodies bool   `json:"include_bodies,omitempty" jsonschema:"Include the messages' texts (default: headers only, as in Agent Mail)."`
		SinceTS       string `json:"since_ts,omitempty" jsonschema:"Only the messages received after this time (ISO-8601), read or not. Without it, the unread ones only (Agent Mail lists the latest, read or not)."`
		Topic         string `json:"topic,omitempty" jsonschema:"Only the messages sent to this claudemesh topic (#name), or @group, or * (Agent Mail's topic tags do not exist here)."`
		amFormat
	}
	amMessageIn struct {
		amProject
		amAgent
		MessageID string `json:"message_id" jsonschema:"The message's id, as fetch_inbox shows it."`
		amFormat
	}
	amReadOut struct {
		MessageID string `json:"message_id" jsonschema:"The message."`
		Read      bool   `json:"read" jsonschema:"It is read now."`
	}
	amSearchIn struct {
		amProject
		amAgent
		Query string `json:"query" jsonschema:"The words to look for in the subjects and texts of the messages you received."`
		Limit int    `json:"limit,omitempty" jsonschema:"At most this many messages, 1-100 (default 20)."`
		amFormat
	}
	amFetchTopicIn struct {
		amProject
		amAgent
		TopicName     string `json:"topic_name" jsonschema:"A claudemesh topic's name (with or without #): its messages, as every member of the mesh can read them."`
		Limit         int    `json:"limit,omitempty" jsonschema:"At most this many of the newest messages, 1-100 (default 50)."`
		IncludeBodies *bool  `json:"include_bodies,omitempty" jsonschema:"Agent Mail's switch: the texts are always included here."`
		SinceTS       string `json:"since_ts,omitempty" jsonschema:"Only the messages sent after this time (ISO-8601)."`
		amFormat
	}
)

func (m *mcpServer) addAgentMailMailTools() {
	addTool(m.tools, &mcp.Tool{Name: "send_message", Title: "Send a message",
		Description: "Send a message to agents of your mesh by name, as Agent Mail's send_message: to, cc and bcc each get a message " +
			"of their own, under a client_message_id per recipient (the result lists them). Unlike Agent Mail: no attachments; " +
			"recipients do not see who else got it; importance low is sent as priority low.",
		InputSchema: schemaOf[amSendIn](func(p map[string]*jsonschema.Schema) {
			recipientLists(p)
			p["attachment_paths"].Items = &jsonschema.Schema{Type: "string"}
			p["subject"].MaxLength = jsonschema.Ptr(messages.MaxSubjectBytes)
			p["body_md"].MinLength, p["body_md"].MaxLength = jsonschema.Ptr(1), jsonschema.Ptr(messages.MaxMessageBytes)
			p["importance"].Enum = []any{"low", messages.ImportanceNormal, messages.ImportanceHigh, messages.ImportanceUrgent}
			p["thread_id"].Pattern = `^[!-~]{1,128}$`
		}),
	}, m.amSend)
	addTool(m.tools, &mcp.Tool{Name: "reply_message", Title: "Reply to a message",
		Description: "Answer a message you received, in its thread, as Agent Mail's reply_message: to its sender unless to, cc or " +
			"bcc name others, with its subject after subject_prefix and its importance (its ack_required is not carried over).",
		InputSchema: schemaOf[amReplyIn](func(p map[string]*jsonschema.Schema) {
			agentMailIDs(p, "message_id")
			p["body_md"].MinLength, p["body_md"].MaxLength = jsonschema.Ptr(1), jsonschema.Ptr(messages.MaxMessageBytes)
			recipientLists(p)
			p["subject_prefix"].MaxLength = jsonschema.Ptr(32)
		}),
	}, m.amReply)
	addTool(m.tools, &mcp.Tool{Name: "fetch_inbox", Title: "Fetch your inbox",
		Description: "List the messages you received without marking them read, as Agent Mail's fetch_inbox, oldest first: the " +
			"unread ones, or with since_ts every message after it. Then mark_message_read or acknowledge_message.",
		InputSchema: schemaOf[amFetchInboxIn](func(p map[string]*jsonschema.Schema) {
			p["limit"].Minimum, p["limit"].Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(float64(fetchInboxMax))
			p["since_ts"].MaxLength = jsonschema.Ptr(64)
			p["topic"].MaxLength = jsonschema.Ptr(messages.MaxPeerNameBytes)
		}),
	}, m.amFetchInbox)
	m.addAgentMailReadTools()
}

// addAgentMailReadTools registers the set's tools that mark, acknowledge,
// search and read messages.
func (m *mcpServer) addAgentMailReadTools() {
	addTool(m.tools, &mcp.Tool{Name: "mark_message_read", Title: "Mark a message read",
		Description: "Mark a message you received as read, as Agent Mail's mark_message_read (claudemesh's mark_read): fetch_inbox no longer lists it as unread.",
		Annotations: writes(false, true, false),
		InputSchema: schemaOf[amMessageIn](func(p map[string]*jsonschema.Schema) { agentMailIDs(p, "message_id") }),
	}, m.amMarkRead)
	addTool(m.tools, &mcp.Tool{Name: "acknowledge_message", Title: "Acknowledge a message",
		Description: "Acknowledge a message you received (and mark it read), as Agent Mail's acknowledge_message: a receipt goes " +
			"back to its sender, once however often you call it.",
		InputSchema: schemaOf[amMessageIn](func(p map[string]*jsonschema.Schema) { agentMailIDs(p, "message_id") }),
	}, m.amAck)
	addTool(m.tools, &mcp.Tool{Name: "search_messages", Title: "Search messages",
		Description: "Search the messages you received by the words of their subject and text, best match first, as Agent Mail's " +
			"search_messages (no FTS5 query syntax: words, and the exact phrase first). It marks nothing read.",
		InputSchema: schemaOf[amSearchIn](func(p map[string]*jsonschema.Schema) {
			p["query"].MinLength, p["query"].MaxLength = jsonschema.Ptr(1), jsonschema.Ptr(messages.MaxSearchQueryBytes)
			p["limit"].Minimum, p["limit"].Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(float64(messages.MaxSearchLimit))
		}),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in amSearchIn) (*mcp.CallToolResult, *messageList, error) {
		return m.searchMessages(ctx, req, searchMessagesIn{Query: in.Query, Limit: in.Limit})
	})
	addTool(m.tools, &mcp.Tool{Name: "fetch_topic", Title: "Read a topic",
		Description: "Read a claudemesh topic's messages, oldest first, as every member can: Agent Mail's fetch_topic, where a " +
			"topic is a channel (#name, topic_name here) rather than a tag on messages.",
		Annotations: readOnly(),
		InputSchema: schemaOf[amFetchTopicIn](func(p map[string]*jsonschema.Schema) {
			p["topic_name"].MinLength, p["topic_name"].MaxLength = jsonschema.Ptr(1), jsonschema.Ptr(65)
			p["limit"].Minimum, p["limit"].Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(float64(checkMessagesMax))
			p["since_ts"].MaxLength = jsonschema.Ptr(64)
		}),
	}, m.amFetchTopic)
}

// recipientLists bounds Agent Mail's to, cc and bcc: lists of names.
func recipientLists(p map[string]*jsonschema.Schema) {
	for _, list := range []string{"to", "cc", "bcc"} {
		p[list].MaxItems = jsonschema.Ptr(maxRecipients)
		p[list].Items = &jsonschema.Schema{Type: "string", MinLength: jsonschema.Ptr(1), MaxLength: jsonschema.Ptr(messages.MaxPeerNameBytes)}
	}
}

func (m *mcpServer) amSend(ctx context.Context, req *mcp.CallToolRequest, in amSendIn) (*mcp.CallToolResult, *sendMessageOut, error) {
	if err := noAttachments(in.AttachmentPaths); err != nil {
		return nil, nil, err
	}
	to := recipientList(in.To, in.CC, in.BCC)
	if in.Broadcast {
		to.names = append(to.names, "*")
	}
	if len(to.names) == 0 {
		return nil, nil, errors.New("no recipient; nothing was sent: name agents in to (list_peers shows them), or set broadcast")
	}
	send := sendMessageIn{To: to, Message: in.BodyMD, Subject: in.Subject, Importance: in.Importance, AckRequired: in.AckRequired,
		ThreadID: in.ThreadID}
	if in.Importance == "low" {
		send.Priority, send.Importance = "low", ""
	}
	return m.sendMessage(ctx, req, send)
}

func (m *mcpServer) amReply(ctx context.Context, req *mcp.CallToolRequest, in amReplyIn) (*mcp.CallToolResult, *sendMessageOut, error) {
	reply := replyMessageIn{ID: in.MessageID, Message: in.BodyMD, subjectPrefix: in.SubjectPrefix}
	if to := recipientList(in.To, in.CC, in.BCC); len(to.names) > 0 {
		reply.To = &to
	}
	return m.replyMessage(ctx, req, reply)
}

func (m *mcpServer) amFetchInbox(ctx context.Context, req *mcp.CallToolRequest, in amFetchInboxIn) (*mcp.CallToolResult, *fetchInboxOut, error) {
	return m.fetchInbox(ctx, req, fetchInboxIn{Limit: in.Limit, Since: in.SinceTS, UrgentOnly: in.UrgentOnly, Topic: in.Topic,
		headersOnly: !in.IncludeBodies})
}

func (m *mcpServer) amMarkRead(ctx context.Context, req *mcp.CallToolRequest, in amMessageIn) (*mcp.CallToolResult, *amReadOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	it, err := m.received(ctx, s, in.MessageID)
	if err != nil {
		return nil, nil, err
	}
	if _, _, err := m.markRead(ctx, req, markReadIn{IDs: []string{it.ID}}); err != nil {
		return nil, nil, err
	}
	return textResult(fmt.Sprintf("Message %s is read.", it.ID)), &amReadOut{MessageID: it.ID, Read: true}, nil
}

func (m *mcpServer) amAck(ctx context.Context, req *mcp.CallToolRequest, in amMessageIn) (*mcp.CallToolResult, *ackMessageOut, error) {
	res, out, err := m.ackMessage(ctx, req, ackMessageIn{ID: in.MessageID})
	if err != nil {
		return nil, nil, err
	}
	if _, _, err := m.markRead(ctx, req, markReadIn{IDs: []string{out.ID}}); err != nil {
		return nil, nil, err
	}
	return res, out, nil
}

func (m *mcpServer) amFetchTopic(ctx context.Context, req *mcp.CallToolRequest, in amFetchTopicIn) (*mcp.CallToolResult, *topicHistoryOut, error) {
	var since time.Time
	if in.SinceTS != "" {
		var err error
		if since, err = parseSince(in.SinceTS); err != nil {
			return nil, nil, err
		}
	}
	res, out, err := m.topicHistory(ctx, req, topicHistoryIn{Topic: in.TopicName, Limit: cmp.Or(in.Limit, 50)})
	if err != nil || since.IsZero() {
		return res, out, err
	}
	kept := out.Messages[:0]
	var text strings.Builder
	for _, msg := range out.Messages {
		if at, err := time.Parse(time.RFC3339Nano, msg.At); err != nil || at.After(since) {
			kept = append(kept, msg)
			fmt.Fprintf(&text, "\n[%s] %s: %s", msg.At, msg.From, msg.Body)
		}
	}
	out.Messages = kept
	n := len(kept)
	return textResult(fmt.Sprintf("#%s, %d %s after %s, oldest first:", out.Topic, n, plural(n, "message", "messages"),
		since.UTC().Format(time.RFC3339)) + text.String()), out, nil
}
