package actors

import (
	"cmp"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
)

// TopicTimeout is how long a topic request waits for the broker's answer.
const TopicTimeout = 10 * time.Second

// Topics on a mesh's broker connection (wire protocol §2.7). The
// connection relays the IPC's topic requests as frames correlated by
// _reqId, and keeps the mesh's topics (name → id) as the last topic_list
// on this connection gave them: a `#name` send is resolved from it, and a
// miss asks the broker again. The same frames serve our broker and
// upstream's. Resolving runs here, in the connection actor, so the accept
// path (IPC handler → accept router → store) never waits on the broker
// inside an actor of its own.

// topicCalls are a connection's topic requests in flight and its topics.
type topicCalls struct {
	inflight reqCalls[*topicCall]
	ids      map[string]bool   // topic ids
	names    map[string]string // topic name → id
}

// topicCall is one request in flight: a TopicRequest's Op, or resolveOp.
type topicCall struct {
	who *actor.PID
	op  string
	ref string // the topic as the caller named it
}

// resolveOp marks a topic_list sent to resolve a `#` target, learnOp one
// sent at the connection's start to learn the topics' names (known).
const (
	resolveOp = "resolve"
	learnOp   = "learn"
)

// topicExpired is the timer of the request id.
type topicExpired struct{ id string }

// errTopicTimeout is a topic request the broker did not answer in time
// (an upstream broker answers no unknown request).
var errTopicTimeout = errors.New("the broker did not answer the topic request in time")

func (t *topicCalls) call(who *actor.PID, op, ref string) string {
	return t.inflight.call("tp", &topicCall{who: who, op: op, ref: ref})
}

// take removes and returns the call of id (nil: none, or already answered).
func (t *topicCalls) take(id string) *topicCall {
	c, _ := t.inflight.take(id)
	return c
}

// lookup is the id ref names in the cache: an id, else a name.
func (t *topicCalls) lookup(ref string) (string, bool) {
	if t.ids[ref] {
		return ref, true
	}
	id, ok := t.names[ref]
	return id, ok
}

// known is the cache as topic id → name, for the inbox's readers.
func (t *topicCalls) known() *messages.TopicNamesKnown {
	names := make(map[string]string, len(t.names))
	for name, id := range t.names {
		names[id] = name
	}
	return &messages.TopicNamesKnown{Names: names}
}

// learnTopics asks a membership's new connection's broker for the topic
// list, so that the inbox shows topics by name (TopicNames) before anyone
// lists them; no one waits for the answer. A session's connection asks
// nothing at its start (a hundred sessions, a hundred lists): it learns the
// topics it lists or creates, and the inbox asks its membership's
// connection for the others.
func (b *BrokerConn) learnTopics(ctx actor.Context) {
	if b.cfg.Session != nil {
		return
	}
	id := b.topics.call(nil, learnOp, "")
	b.topicSend(ctx, id, &messages.TopicListFrame{Type: messages.TypeTopicList, ReqID: id})
}

func (t *topicCalls) learn(topics []messages.TopicInfo) {
	t.ids, t.names = make(map[string]bool, len(topics)), make(map[string]string, len(topics))
	for _, tp := range topics {
		t.ids[tp.ID], t.names[tp.Name] = true, tp.ID
	}
}

// topicRequest sends the frames of one request; the answer comes back as a
// frame (topicFrame) or an error (topicError), or the timer fires.
func (b *BrokerConn) topicRequest(ctx actor.Context, m *messages.TopicRequest) {
	id := b.topics.call(ctx.Sender(), m.Op, m.Topic)
	var frames []any
	switch m.Op {
	case messages.TypeTopicCreate:
		frames = []any{&messages.TopicCreateFrame{Type: m.Op, Name: m.Name, Description: m.Description, Visibility: m.Visibility, ReqID: id}}
	case messages.TypeTopicList:
		frames = []any{&messages.TopicListFrame{Type: m.Op, ReqID: id}}
	case messages.TypeTopicJoin:
		frames = []any{&messages.TopicJoinFrame{Type: m.Op, Topic: m.Topic, Role: m.Role, ReqID: id}}
	case messages.TypeTopicLeave:
		frames = []any{&messages.TopicRefFrame{Type: m.Op, Topic: m.Topic, ReqID: id}}
	case messages.TypeTopicHistory:
		frames = []any{&messages.TopicHistoryFrame{Type: m.Op, Topic: m.Topic, Limit: m.Limit, BeforeID: m.BeforeID, ReqID: id}}
	}
	if m.Op == messages.TypeTopicJoin || m.Op == messages.TypeTopicLeave || m.Op == messages.TypeTopicMembers {
		// The broker answers a join or leave only with an error: the
		// members, asked with the same _reqId, are the answer.
		frames = append(frames, &messages.TopicRefFrame{Type: messages.TypeTopicMembers, Topic: m.Topic, ReqID: id})
	}
	b.topicSend(ctx, id, frames...)
}

// resolveTopic answers the id of a `#` target from the cache, else asks
// for the topic list. With the broker down an id-shaped ref passes as it
// is (the broker refuses it in the ack if it names no topic); a name
// cannot be resolved.
func (b *BrokerConn) resolveTopic(ctx actor.Context, m *messages.ResolveTopic) {
	if id, ok := b.topics.lookup(m.Ref); ok {
		ctx.Respond(&messages.TopicResolved{ID: id})
		return
	}
	if b.conn == nil && messages.IsTopicID(m.Ref) {
		ctx.Respond(&messages.TopicResolved{ID: m.Ref})
		return
	}
	id := b.topics.call(ctx.Sender(), resolveOp, m.Ref)
	b.topicSend(ctx, id, &messages.TopicListFrame{Type: messages.TypeTopicList, ReqID: id})
}

func (b *BrokerConn) topicSend(ctx actor.Context, id string, frames ...any) {
	for _, f := range frames {
		if err := b.send(f); err != nil {
			b.topicAnswer(ctx, b.topics.take(id), err)
			return
		}
	}
	workers.SendLater(ctx, TopicTimeout, &topicExpired{id: id})
}

// topicFrame takes a broker's answer to a topic request; it reports false
// for a frame that is none.
func (b *BrokerConn) topicFrame(ctx actor.Context, f any) bool {
	switch f := f.(type) {
	case *messages.TopicCreatedFrame:
		if b.topics.names != nil {
			b.topics.ids[f.Topic.ID], b.topics.names[f.Topic.Name] = true, f.Topic.ID
		}
		b.topicAnswer(ctx, b.topics.take(f.ReqID), &messages.TopicReply{Created: f})
	case *messages.TopicListResponseFrame:
		b.topics.learn(f.Topics)
		b.topicAnswer(ctx, b.topics.take(f.ReqID), &messages.TopicReply{Topics: f.Topics})
	case *messages.TopicMembersResponseFrame:
		b.topicAnswer(ctx, b.topics.take(f.ReqID), &messages.TopicReply{Members: f.Members})
	case *messages.TopicHistoryResponseFrame:
		b.topicAnswer(ctx, b.topics.take(f.ReqID), &messages.TopicReply{Messages: f.Messages})
	default:
		return false
	}
	return true
}

// topicError answers the request an error frame names (upstream puts the
// _reqId of a topic request in id); it reports false for an error of no
// topic request.
func (b *BrokerConn) topicError(ctx actor.Context, f *messages.ErrorFrame) bool {
	call := b.topics.take(cmp.Or(f.ReqID, f.ID))
	if call == nil {
		return false
	}
	var err error
	switch f.Code {
	case messages.CodeTopicNotFound:
		err = messages.TopicNotFound(b.cfg.Slug, call.ref)
	case "invalid_args":
		err = refusedInput(messages.CodeInvalidTopic, f)
	default:
		err = b.brokerRefused(f)
	}
	b.topicAnswer(ctx, call, err)
	return true
}

func (b *BrokerConn) topicExpired(ctx actor.Context, m *topicExpired) {
	b.topicAnswer(ctx, b.topics.take(m.id), errTopicTimeout)
}

// topicsDown fails every request in flight and forgets the topics: the
// connection is gone.
func (b *BrokerConn) topicsDown(ctx actor.Context) {
	for _, call := range b.topics.inflight.drain() {
		b.topicAnswer(ctx, call, ErrNotConnected)
	}
	b.topics.ids, b.topics.names = nil, nil
}

// topicAnswer sends call its reply: res is a *messages.TopicReply or an
// error. A resolve is answered from the cache the topic list refreshed.
func (b *BrokerConn) topicAnswer(ctx actor.Context, call *topicCall, res any) {
	if call == nil || call.op == learnOp {
		return
	}
	err, _ := res.(error)
	if call.op != resolveOp {
		if err != nil {
			res = &messages.TopicReply{Err: err}
		}
		ctx.Send(call.who, res)
		return
	}
	out := &messages.TopicResolved{Err: err}
	if err == nil {
		id, ok := b.topics.lookup(call.ref)
		out.ID = id
		if !ok {
			out.Err = messages.TopicNotFound(b.cfg.Slug, "#"+call.ref)
		}
	}
	ctx.Send(call.who, out)
}
