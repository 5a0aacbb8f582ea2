package broker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// Topics (wire protocol §2.7). A session_hello connection (an agent
// session) creates, joins, leaves and marks a topic read as its session,
// for itself alone: it receives a topic's messages once it joined, its
// member's other sessions and its member connection not unless they
// joined too. Any other connection acts as its member (a daemon's member
// connection, an upstream hello with or without a sessionPubkey, whose
// topics are its member's as upstream's are: its member's every
// connection receiving for the member key gets them). A topic's history
// is the mesh's to read, joined or not, as upstream's: a session reads
// there what was sent before it joined. Requests answer in upstream's
// shapes; topic_join,
// topic_leave and topic_mark_read answer nothing but an error. Errors
// carry the request's _reqId in both id and _reqId (upstream puts it in
// id).

// Error frame codes of the topic requests, besides topic_not_found.
const (
	codeInvalidArgs = "invalid_args"
	codeInternal    = "internal"
)

// topicFrames are the topic requests; topic_leave, topic_members and
// topic_mark_read share one frame type, and topicRef tells them apart.
var topicFrames = frames{
	answers((*conn).topicCreate),
	answers((*conn).topicList),
	answers((*conn).topicJoin),
	answers((*conn).topicRef),
	answers((*conn).topicHistory),
}

// topicParty is who this connection joins topics as: its session for a
// session_hello connection, else its member.
func (c *conn) topicParty() broker.TopicParty {
	if c.session {
		return broker.TopicParty{MemberID: c.member.ID, SessionPubkey: c.sender, SessionName: c.name}
	}
	return broker.TopicParty{MemberID: c.member.ID}
}

// topicCreate creates the topic (its creator joined as lead) or, for a
// name the mesh has, answers that topic with created false and joins it.
func (c *conn) topicCreate(f *messages.TopicCreateFrame) {
	t, created, err := c.store.CreateTopic(context.Background(), c.mesh.ID, c.topicParty(),
		broker.NewTopic{Name: f.Name, Description: f.Description, Visibility: f.Visibility})
	if err != nil {
		c.topicError(f.ReqID, f.Name, err)
		return
	}
	c.log.Info("topic_create", "conn", c.id, "topic", t.ID, "created", created)
	c.sendFrame(&messages.TopicCreatedFrame{Type: messages.TypeTopicCreated, Created: created, ReqID: f.ReqID,
		Topic: messages.TopicRef{ID: t.ID, Name: t.Name, Visibility: t.Visibility}})
}

func (c *conn) topicList(f *messages.TopicListFrame) {
	topics, err := c.store.Topics(context.Background(), c.mesh.ID)
	if err != nil {
		c.topicError(f.ReqID, "", err)
		return
	}
	out := &messages.TopicListResponseFrame{Type: messages.TypeTopicListResponse, Topics: make([]messages.TopicInfo, len(topics)),
		ReqID: f.ReqID}
	for i, t := range topics {
		out.Topics[i] = messages.TopicInfo{ID: t.ID, Name: t.Name, Description: t.Description, Visibility: t.Visibility,
			MemberCount: t.MemberCount, CreatedAt: isoTime(t.CreatedAt)}
	}
	c.sendFrame(out)
}

func (c *conn) topicJoin(f *messages.TopicJoinFrame) {
	t, ok := c.topic(f.ReqID, f.Topic)
	if !ok {
		return
	}
	if err := c.store.JoinTopic(context.Background(), t.ID, c.topicParty(), f.Role); err != nil {
		c.topicError(f.ReqID, f.Topic, err)
	}
}

// topicRef answers the requests that name only a topic: topic_leave,
// topic_members and topic_mark_read.
func (c *conn) topicRef(f *messages.TopicRefFrame) {
	t, ok := c.topic(f.ReqID, f.Topic)
	if !ok {
		return
	}
	bg := context.Background()
	switch f.Type {
	case messages.TypeTopicLeave:
		if err := c.store.LeaveTopic(bg, t.ID, c.topicParty()); err != nil {
			c.topicError(f.ReqID, f.Topic, err)
		}
	case messages.TypeTopicMarkRead:
		if err := c.store.MarkTopicRead(bg, t.ID, c.topicParty()); err != nil {
			c.topicError(f.ReqID, f.Topic, err)
		}
	case messages.TypeTopicMembers:
		members, err := c.store.TopicMembers(bg, t.ID)
		if err != nil {
			c.topicError(f.ReqID, f.Topic, err)
			return
		}
		out := &messages.TopicMembersResponseFrame{Type: messages.TypeTopicMembersResponse, Topic: f.Topic,
			Members: make([]messages.TopicMemberInfo, len(members)), ReqID: f.ReqID}
		for i, m := range members {
			out.Members[i] = messages.TopicMemberInfo{MemberID: m.MemberID, Pubkey: m.Pubkey, DisplayName: m.DisplayName,
				Role: m.Role, JoinedAt: isoTime(m.JoinedAt)}
			if m.LastReadAt != nil {
				at := isoTime(*m.LastReadAt)
				out.Members[i].LastReadAt = &at
			}
		}
		c.sendFrame(out)
	}
}

func (c *conn) topicHistory(f *messages.TopicHistoryFrame) {
	t, ok := c.topic(f.ReqID, f.Topic)
	if !ok {
		return
	}
	history, err := c.store.TopicHistory(context.Background(), c.mesh.ID, t.ID, f.Limit, f.BeforeID)
	if err != nil {
		c.topicError(f.ReqID, f.Topic, err)
		return
	}
	out := &messages.TopicHistoryResponseFrame{Type: messages.TypeTopicHistoryResponse, Topic: f.Topic,
		Messages: make([]messages.TopicMessage, len(history)), ReqID: f.ReqID}
	for i, m := range history {
		out.Messages[i] = messages.TopicMessage{ID: m.ID, SenderPubkey: m.SenderPubkey, SenderMemberID: m.SenderMemberID,
			SenderName: m.SenderName, Nonce: m.Nonce, Ciphertext: m.Ciphertext, ReplyToID: m.ReplyToID,
			CreatedAt: isoTime(m.CreatedAt)}
	}
	c.sendFrame(out)
}

// topic resolves ref (an id, else a name) in the connection's mesh, or
// answers the request's error and reports false.
func (c *conn) topic(reqID, ref string) (*broker.Topic, bool) {
	t, err := c.store.Topic(context.Background(), c.mesh.ID, ref)
	if err != nil {
		c.topicError(reqID, ref, err)
		return nil, false
	}
	return t, true
}

// topicError answers a failed topic request: topic_not_found, invalid_args
// for a refused field, internal (logged) for a store failure.
func (c *conn) topicError(reqID, ref string, err error) {
	code, msg := codeInternal, "the broker could not read or write its topics; try again"
	switch {
	case errors.Is(err, broker.ErrTopicNotFound):
		code, msg = messages.CodeTopicNotFound, fmt.Sprintf("topic %q not found", ref)
	case errors.Is(err, broker.ErrInvalid):
		code, msg = codeInvalidArgs, err.Error()
	default:
		c.log.Error("topic_request_failed", "conn", c.id, "err", err)
	}
	c.sendFrame(&messages.ErrorFrame{Type: messages.TypeError, Code: code, Message: msg, ID: reqID, ReqID: reqID})
}

// topicRecipients is the topic step of a send: for a `#<id>` target, who
// joined the topic (the hub keeps the sessions connected); ok is false
// when the send was answered (no such topic: refused, never stored; a
// store failure: 503).
func (c *conn) topicRecipients(ack *messages.AckFrame, targetSpec string) (joined *broker.TopicAudience, ok bool) {
	id, isTopic := strings.CutPrefix(targetSpec, "#")
	if !isTopic {
		return nil, true
	}
	joined, err := c.store.TopicRecipients(context.Background(), c.mesh.ID, id)
	switch {
	case errors.Is(err, broker.ErrTopicNotFound):
		c.reply(rejected(ack, &messages.Error{Status: http.StatusNotFound, Code: messages.CodeTopicNotFound}))
		return nil, false
	case err != nil:
		c.failedSend(ack, err)
		return nil, false
	}
	return joined, true
}

// topicMembers is the recipients of a topic: the member keys of the
// members joined as themselves, and the session keys of the joined
// sessions connected now, here or at another replica, but the sender's
// keys. A joined session not connected gets no row (as a broadcast
// reaches the sessions connected): what was sent meanwhile is in the
// topic's history.
func (h *hub) topicMembers(q *hubResolve) []string {
	keys := make(map[string]bool, len(q.topicMembers.Members)+len(q.topicMembers.Sessions))
	for _, pk := range q.topicMembers.Members {
		keys[pk] = true
	}
	joined := make(map[string]bool, len(q.topicMembers.Sessions))
	for _, pk := range q.topicMembers.Sessions {
		joined[pk] = true
	}
	h.addSessions(q, keys, func(session, _ string) bool { return joined[session] })
	return sortedBut(keys, q.senderKeys)
}

func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
