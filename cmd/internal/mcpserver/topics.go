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

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// The topic tools: the mesh's topics through the daemon, as the session.
type (
	topicListIn  struct{}
	topicListOut struct {
		Topics []topicOut `json:"topics" jsonschema:"The mesh's topics."`
	}
	topicOut struct {
		Name        string `json:"name" jsonschema:"The topic's name: send_message takes #name as to."`
		ID          string `json:"id" jsonschema:"The topic's id."`
		Description string `json:"description,omitempty" jsonschema:"What the topic is for."`
		Members     int    `json:"members" jsonschema:"How many members joined it."`
	}
	topicCreateIn struct {
		Name        string `json:"name" jsonschema:"The new topic's name: 1-64 of A-Z a-z 0-9 _ . / - without the #."`
		Description string `json:"description,omitempty" jsonschema:"What the topic is for, shown by topic_list."`
	}
	topicCreateOut struct {
		Topic   topicOut `json:"topic" jsonschema:"The topic."`
		Created bool     `json:"created" jsonschema:"false when a topic of that name existed: you joined it instead."`
	}
	topicRefIn struct {
		Topic string `json:"topic" jsonschema:"The topic's name (with or without #) or id, as topic_list shows them."`
	}
	topicJoinIn struct {
		Topic string `json:"topic" jsonschema:"The topic's name (with or without #) or id, as topic_list shows them."`
		Role  string `json:"role,omitempty" jsonschema:"lead, member (the default) or observer."`
	}
	topicMembersOut struct {
		Topic   string           `json:"topic" jsonschema:"The topic as named."`
		Members []topicMemberOut `json:"members" jsonschema:"Its members."`
	}
	topicMemberOut struct {
		Name   string `json:"name" jsonschema:"The member's display name."`
		Pubkey string `json:"pubkey" jsonschema:"The member's key."`
		Role   string `json:"role" jsonschema:"lead, member or observer."`
	}
	topicHistoryIn struct {
		Topic string `json:"topic" jsonschema:"The topic's name (with or without #) or id, as topic_list shows them."`
		Limit int    `json:"limit,omitempty" jsonschema:"At most this many of the newest messages, 1-100 (default 20)."`
	}
	topicHistoryOut struct {
		Topic    string         `json:"topic" jsonschema:"The topic as named."`
		Messages []topicMessage `json:"messages" jsonschema:"The messages, oldest first."`
	}
	topicMessage struct {
		ID         string `json:"id" jsonschema:"The message's id, for reply_to_id."`
		From       string `json:"from" jsonschema:"The sender's display name, else its pubkey."`
		FromPubkey string `json:"from_pubkey" jsonschema:"The sender's pubkey: send_message takes it as to."`
		Body       string `json:"body" jsonschema:"The text."`
		At         string `json:"at" jsonschema:"When it was sent."`
	}
)

func (m *mcpServer) addTopicTools() {
	topic := func(p map[string]*jsonschema.Schema) { p["topic"].MinLength = jsonschema.Ptr(1) }
	addTool(m.tools, &mcp.Tool{Name: "topic_list", Title: "List topics",
		Description: "List the mesh's topics (conversations by subject): name, id, description and member count. " +
			"Send to one with send_message to #name; join one with topic_join to receive what is sent to it.",
		InputSchema: schemaOf[topicListIn](nil)}, m.topicList)
	addTool(m.tools, &mcp.Tool{Name: "topic_create", Title: "Create a topic",
		Description: "Create a topic and join it as its lead. If the mesh has a topic of that name, you join that one instead.",
		InputSchema: schemaOf[topicCreateIn](func(p map[string]*jsonschema.Schema) {
			p["name"].Pattern = `^[A-Za-z0-9_./-]{1,64}$`
			p["description"].MaxLength = jsonschema.Ptr(1024)
		})}, m.topicCreate)
	addTool(m.tools, &mcp.Tool{Name: "topic_join", Title: "Join a topic",
		Description: "Join a topic: from then on, messages sent to it reach you (check_messages shows them with their topic).",
		InputSchema: schemaOf[topicJoinIn](func(p map[string]*jsonschema.Schema) {
			topic(p)
			p["role"].Enum = []any{"lead", "member", "observer"}
		})}, m.topicJoin)
	addTool(m.tools, &mcp.Tool{Name: "topic_leave", Title: "Leave a topic",
		Description: "Leave a topic: messages sent to it no longer reach you.",
		InputSchema: schemaOf[topicRefIn](topic)}, m.topicLeave)
	addTool(m.tools, &mcp.Tool{Name: "topic_members", Title: "List a topic's members",
		Description: "List who joined a topic, with their roles.",
		InputSchema: schemaOf[topicRefIn](topic)}, m.topicMembers)
	addTool(m.tools, &mcp.Tool{Name: "topic_history", Title: "Read a topic's history",
		Description: "Read the latest messages sent to a topic, oldest first, whether or not you had joined it then.",
		InputSchema: schemaOf[topicHistoryIn](func(p map[string]*jsonschema.Schema) {
			topic(p)
			p["limit"].Minimum, p["limit"].Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(100.0)
		})}, m.topicHistory)
}

// topicError is the sentence for a failed topic request.
func (m *mcpServer) topicError(s *Session, topic string, err error) error {
	var me *messages.Error
	if errors.As(err, &me) && me.Code == messages.CodeTopicNotFound {
		return fmt.Errorf("there is no topic %s on your mesh; call topic_list to see the topics, or topic_create to make it", quoteArg(topic))
	}
	if errors.As(err, &me) && me.Code == messages.CodeInvalidTopic {
		return fmt.Errorf("invalid argument: %s; nothing was changed: fix it and call again", agentDetail(s, me.Detail))
	}
	return m.toolError(s, err)
}

func (m *mcpServer) topicList(ctx context.Context, _ *mcp.CallToolRequest, _ topicListIn) (*mcp.CallToolResult, *topicListOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	res, err := ipc.WhenLinked(ctx, func() (*messages.TopicList, error) { return s.as().Topics(ctx, "") })
	if err != nil {
		return nil, nil, m.topicError(s, "", err)
	}
	out := &topicListOut{Topics: make([]topicOut, len(res.Topics))}
	var names []string
	for i, t := range res.Topics {
		out.Topics[i] = topicOut{Name: t.Name, ID: t.ID, Description: t.Description, Members: t.MemberCount}
		names = append(names, "#"+t.Name)
	}
	if len(names) == 0 {
		return textResult("The mesh has no topics yet; topic_create makes one."), out, nil
	}
	return textResult(fmt.Sprintf("%s: %s.", count(len(names), "topic", "topics"), strings.Join(names, ", "))), out, nil
}

func (m *mcpServer) topicCreate(ctx context.Context, _ *mcp.CallToolRequest, in topicCreateIn) (*mcp.CallToolResult, *topicCreateOut, error) {
	req := &messages.TopicCreateRequest{Name: strings.TrimPrefix(in.Name, "#"), Description: in.Description}
	if err := req.Validate(); err != nil {
		return nil, nil, m.topicError(nil, in.Name, err)
	}
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	res, err := s.as().CreateTopic(ctx, req)
	if err != nil {
		return nil, nil, m.topicError(s, in.Name, err)
	}
	out := &topicCreateOut{Topic: topicOut{Name: res.Topic.Name, ID: res.Topic.ID, Description: in.Description}, Created: res.Created}
	if !res.Created {
		return textResult(fmt.Sprintf("#%s already existed; you joined it.", res.Topic.Name)), out, nil
	}
	return textResult(fmt.Sprintf("Created #%s (id %s); you lead it. Peers join it with topic_join.", res.Topic.Name, res.Topic.ID)), out, nil
}

func (m *mcpServer) topicJoin(ctx context.Context, _ *mcp.CallToolRequest, in topicJoinIn) (*mcp.CallToolResult, *topicMembersOut, error) {
	return m.topicMembership(ctx, &messages.TopicMembershipRequest{Topic: in.Topic, Role: in.Role}, true)
}

func (m *mcpServer) topicLeave(ctx context.Context, _ *mcp.CallToolRequest, in topicRefIn) (*mcp.CallToolResult, *topicMembersOut, error) {
	return m.topicMembership(ctx, &messages.TopicMembershipRequest{Topic: in.Topic}, false)
}

func (m *mcpServer) topicMembership(ctx context.Context, req *messages.TopicMembershipRequest, join bool) (*mcp.CallToolResult, *topicMembersOut, error) {
	if err := req.Validate(); err != nil {
		return nil, nil, m.topicError(nil, req.Topic, err)
	}
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	call, verb := s.as().LeaveTopic, "You left"
	if join {
		call, verb = s.as().JoinTopic, "You joined"
	}
	// A join or leave repeated is the same membership: an agent's first
	// call may wait for its session's link.
	res, err := ipc.WhenLinked(ctx, func() (*messages.TopicMembers, error) { return call(ctx, req) })
	if err != nil {
		return nil, nil, m.topicError(s, req.Topic, err)
	}
	out := membersOut(res)
	return textResult(fmt.Sprintf("%s #%s; it has %s.", verb, req.Topic, count(len(out.Members), "member", "members"))), out, nil
}

func (m *mcpServer) topicMembers(ctx context.Context, _ *mcp.CallToolRequest, in topicRefIn) (*mcp.CallToolResult, *topicMembersOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	topic := strings.TrimPrefix(in.Topic, "#")
	res, err := ipc.WhenLinked(ctx, func() (*messages.TopicMembers, error) { return s.as().TopicMembers(ctx, "", topic) })
	if err != nil {
		return nil, nil, m.topicError(s, in.Topic, err)
	}
	out := membersOut(res)
	names := make([]string, len(out.Members))
	for i, mm := range out.Members {
		names[i] = mm.Name + " (" + mm.Role + ")"
	}
	return textResult(fmt.Sprintf("#%s has %s: %s.", topic, count(len(names), "member", "members"), strings.Join(names, ", "))), out, nil
}

func membersOut(res *messages.TopicMembers) *topicMembersOut {
	out := &topicMembersOut{Topic: res.Topic, Members: make([]topicMemberOut, len(res.Members))}
	for i, mm := range res.Members {
		out.Members[i] = topicMemberOut{Name: mm.DisplayName, Pubkey: mm.Pubkey, Role: mm.Role}
	}
	return out
}

func (m *mcpServer) topicHistory(ctx context.Context, _ *mcp.CallToolRequest, in topicHistoryIn) (*mcp.CallToolResult, *topicHistoryOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	limit := in.Limit
	if limit <= 0 {
		limit = checkMessagesDefault
	}
	topic := strings.TrimPrefix(in.Topic, "#")
	res, err := ipc.WhenLinked(ctx, func() (*messages.TopicHistory, error) {
		return s.as().TopicHistory(ctx, "", topic, min(limit, checkMessagesMax), "")
	})
	if err != nil {
		return nil, nil, m.topicError(s, in.Topic, err)
	}
	out := &topicHistoryOut{Topic: topic, Messages: make([]topicMessage, len(res.Messages))}
	var text strings.Builder
	fmt.Fprintf(&text, "#%s, %s, oldest first:", topic, count(len(res.Messages), "message", "messages"))
	for i, msg := range res.Messages {
		from := msg.SenderName
		if from == "" {
			from = msg.SenderPubkey
		}
		body := messages.Deref(msg.Body)
		out.Messages[len(res.Messages)-1-i] = topicMessage{ID: msg.ID, From: from, FromPubkey: msg.SenderPubkey, Body: body,
			At: msg.CreatedAt}
	}
	for _, msg := range out.Messages {
		from := msg.From
		if from != msg.FromPubkey {
			from = fmt.Sprintf("%s (%.16s…)", from, msg.FromPubkey)
		}
		fmt.Fprintf(&text, "\n[%s] %s: %s", msg.At, from, msg.Body)
	}
	return textResult(text.String()), out, nil
}

// topicNamesRefresh bounds how often the topic list is asked again for an
// id it does not name.
const topicNamesRefresh = 5 * time.Second

// topicNames names the topics of the messages pushed to the agent as they
// arrive: the daemon's listings carry a topic's name (topic_name), its
// events only the id. The session's topic list is kept, and asked again
// when an id is not in it, at most every topicNamesRefresh.
type topicNames struct {
	mu      sync.Mutex
	names   map[string]string // id → name
	askedAt time.Time
}

// name is topic id's name, "" when the session's list does not have it.
func (t *topicNames) name(ctx context.Context, s *Session, id string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n, ok := t.names[id]; ok || time.Since(t.askedAt) < topicNamesRefresh {
		return n
	}
	t.askedAt = time.Now()
	list, err := s.as().Topics(ctx, "")
	if err != nil {
		return ""
	}
	t.names = list.Names()
	return t.names[id]
}
