package actors

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
)

// TopicTimeout is how long a topic request waits for the broker's answer.
const TopicTimeout = 10 * time.Second

// Topics on a mesh's broker link (wire protocol §2.7). The relay sends the
// IPC's topic requests as frames correlated by _reqId, and keeps the
// mesh's topics (name → id) as the last topic_list on this link gave them:
// a `#name` send is resolved from it, and a miss asks the broker again.
// Every list and creation is also kept (kept): with the broker away, or
// silent past messages.NameTimeout, a `#name` resolves from the names the
// route's topic lists gave. The same frames serve our broker and
// upstream's. Resolving runs here, in the connection actor, so the accept
// path (IPC handler → accept router → store) never waits on the broker
// inside an actor of its own.
type topicsRelay struct {
	b     *BrokerConn
	kept  *namesRelay
	calls reqCalls[*topicCall]
	ids   map[string]bool   // topic ids
	names map[string]string // topic name → id
}

// topicIDs prefixes the _reqId of a topic request.
const topicIDs = "tp"

// topicCall is one request in flight: a TopicRequest's Op, or resolveOp.
type topicCall struct {
	who *actor.PID
	op  string
	ref string // the topic as the caller named it
}

// resolveOp marks a topic_list sent to resolve a `#` target, learnOp one
// sent at the link's start to learn the topics' names (known).
const (
	resolveOp = "resolve"
	learnOp   = "learn"
)

// topicExpired is the timer of the request id.
type topicExpired struct{ id string }

// errTopicTimeout is a topic request the broker did not answer in time
// (an upstream broker answers no unknown request).
var errTopicTimeout = errors.New("the broker did not answer the topic request in time")

func (r *topicsRelay) routes() relayRoutes {
	return relayRoutes{ids: topicIDs,
		messages: []route{on(r.request), on(r.resolve), on(r.known), on(r.expired)},
		frames:   []route{on(r.created), on(r.listed), on(r.members), on(r.history)},
		refused:  r.refused,
		up:       r.learn,
		down:     r.down,
	}
}

// learn asks a membership's new link's broker for the topic list, so that
// the inbox shows topics by name (TopicNames) before anyone lists them; no
// one waits for the answer. A session's connection asks nothing at its
// start (a hundred sessions, a hundred lists): it learns the topics it
// lists, creates or joins — the topics whose messages reach it, the
// session's own on our broker — and the inbox asks its membership's
// connection for the others.
func (r *topicsRelay) learn(ctx actor.Context) {
	if r.b.cfg.Session == nil {
		r.list(ctx)
	}
}

// list asks the broker for the topic list, which the cache becomes; no
// one waits for the answer.
func (r *topicsRelay) list(ctx actor.Context) {
	id := r.calls.call(topicIDs, &topicCall{op: learnOp})
	r.send(ctx, id, TopicTimeout, &messages.TopicListFrame{Type: messages.TypeTopicList, ReqID: id})
}

// request sends the frames of one request; the answer comes back as a
// frame or an error, or the timer fires.
func (r *topicsRelay) request(ctx actor.Context, m *messages.TopicRequest) {
	id := r.calls.call(topicIDs, &topicCall{who: ctx.Sender(), op: m.Op, ref: m.Topic})
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
	r.send(ctx, id, TopicTimeout, frames...)
	if _, known := r.lookup(m.Topic); m.Op == messages.TypeTopicJoin && !known {
		r.list(ctx) // the joined topic's messages come here: its name is wanted
	}
}

// resolve answers the id of a `#` target from the cache, else asks for the
// topic list, waiting messages.NameTimeout for it. With the broker away,
// or silent, it answers from the names kept (resolveKept).
func (r *topicsRelay) resolve(ctx actor.Context, m *messages.ResolveTopic) {
	if id, ok := r.lookup(m.Ref); ok {
		ctx.Respond(&messages.TopicResolved{ID: id})
		return
	}
	if r.b.conn == nil {
		r.resolveKept(ctx, ctx.Sender(), m.Ref, ErrNotConnected)
		return
	}
	id := r.calls.call(topicIDs, &topicCall{who: ctx.Sender(), op: resolveOp, ref: m.Ref})
	r.send(ctx, id, messages.NameTimeout, &messages.TopicListFrame{Type: messages.TypeTopicList, ReqID: id})
}

// resolveKept answers who the id of ref from the names kept, the broker
// being away (cause): the id a topic list of this route gave the name, else
// an id-shaped ref as it is (the broker refuses it in the ack if it names
// no topic); a name never seen is refused (messages.NeverSeen).
func (r *topicsRelay) resolveKept(ctx actor.Context, who *actor.PID, ref string, cause error) {
	r.kept.then(ctx, func(ctx actor.Context) {
		out := &messages.TopicResolved{}
		if id, ok := r.kept.topicID(ref); ok {
			out.ID = id
		} else if messages.IsTopicID(ref) {
			out.ID = ref
		} else {
			out.Err = messages.NeverSeen("topic", "#"+ref, r.b.cfg.Slug, cause, "the topic's id (#<id>, from claudemesh topic list)")
		}
		ctx.Send(who, out)
	})
}

// known answers the cache, and under it the names kept, as topic id →
// name, for the inbox's readers.
func (r *topicsRelay) known(ctx actor.Context, _ *messages.TopicNames) {
	names := make(map[string]string, len(r.names)+len(r.kept.topics))
	for _, topics := range []map[string]string{r.kept.topics, r.names} {
		for name, id := range topics {
			names[id] = name
		}
	}
	ctx.Respond(&messages.TopicNamesKnown{Names: names})
}

// lookup is the id ref names in the cache: an id, else a name.
func (r *topicsRelay) lookup(ref string) (string, bool) {
	if r.ids[ref] {
		return ref, true
	}
	id, ok := r.names[ref]
	return id, ok
}

// send writes the frames of request id, whose answer is awaited within.
func (r *topicsRelay) send(ctx actor.Context, id string, within time.Duration, frames ...any) {
	for _, f := range frames {
		if err := r.b.send(f); err != nil {
			r.answer(ctx, id, err)
			return
		}
	}
	workers.SendLater(ctx, within, &topicExpired{id: id})
}

// created answers a topic's creation, and adds the topic to the cache and
// to the names kept.
func (r *topicsRelay) created(ctx actor.Context, f *messages.TopicCreatedFrame) {
	if r.names == nil {
		r.ids, r.names = map[string]bool{}, map[string]string{}
	}
	r.ids[f.Topic.ID], r.names[f.Topic.Name] = true, f.Topic.ID
	r.kept.keepTopics(ctx, map[string]string{f.Topic.Name: f.Topic.ID}, false)
	r.answer(ctx, f.ReqID, &messages.TopicReply{Created: f})
}

// listed answers a topic list, and keeps it as the cache and as the names
// kept.
func (r *topicsRelay) listed(ctx actor.Context, f *messages.TopicListResponseFrame) {
	r.ids, r.names = make(map[string]bool, len(f.Topics)), make(map[string]string, len(f.Topics))
	for _, tp := range f.Topics {
		r.ids[tp.ID], r.names[tp.Name] = true, tp.ID
	}
	r.kept.keepTopics(ctx, r.names, true)
	r.answer(ctx, f.ReqID, &messages.TopicReply{Topics: f.Topics})
}

func (r *topicsRelay) members(ctx actor.Context, f *messages.TopicMembersResponseFrame) {
	r.answer(ctx, f.ReqID, &messages.TopicReply{Members: f.Members})
}

func (r *topicsRelay) history(ctx actor.Context, f *messages.TopicHistoryResponseFrame) {
	r.answer(ctx, f.ReqID, &messages.TopicReply{Messages: f.Messages})
}

// refused answers the request an error frame names (upstream puts the
// _reqId of a topic request in id).
func (r *topicsRelay) refused(ctx actor.Context, id string, f *messages.ErrorFrame) bool {
	call := r.calls.pending[id]
	if call == nil {
		return false
	}
	var err error
	switch f.Code {
	case messages.CodeTopicNotFound:
		err = messages.TopicNotFound(r.b.cfg.Slug, call.ref)
	case "invalid_args":
		err = refusedInput(messages.CodeInvalidTopic, f)
	default:
		err = r.b.brokerRefused(f)
	}
	r.answer(ctx, id, err)
	return true
}

func (r *topicsRelay) expired(ctx actor.Context, m *topicExpired) {
	r.answer(ctx, m.id, errTopicTimeout)
}

// down fails every request in flight (a resolve is answered from the
// names kept) and forgets the topics the link gave: the connection is
// gone.
func (r *topicsRelay) down(ctx actor.Context) {
	for _, call := range r.calls.drain() {
		r.reply(ctx, call, ErrNotConnected)
	}
	r.ids, r.names = nil, nil
}

// answer takes the call of id, if it is still in flight, and replies to
// it: res is a *messages.TopicReply or an error.
func (r *topicsRelay) answer(ctx actor.Context, id string, res any) {
	if call, ok := r.calls.take(id); ok {
		r.reply(ctx, call, res)
	}
}

// reply sends call its reply. A resolve is answered from the cache the
// topic list refreshed, or from the names kept when the list did not come
// (the broker silent, the link gone); a learn answers no one.
func (r *topicsRelay) reply(ctx actor.Context, call *topicCall, res any) {
	if call.op == learnOp {
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
	var refused *messages.Error
	if err != nil && !errors.As(err, &refused) {
		r.resolveKept(ctx, call.who, call.ref, err)
		return
	}
	out := &messages.TopicResolved{Err: err}
	if err == nil {
		id, ok := r.lookup(call.ref)
		out.ID = id
		if !ok {
			out.Err = messages.TopicNotFound(r.b.cfg.Slug, "#"+call.ref)
		}
	}
	ctx.Send(call.who, out)
}
