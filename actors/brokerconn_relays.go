package actors

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
)

// A relay is one feature carried over a mesh's broker link: state, topics,
// locks, …. It lives in its own file (brokerconn_<feature>.go), owns its
// requests in flight, and says in routes what it takes: the actor messages
// (the daemon's requests, its own timers, the store's replies), the broker
// frames by type, and the prefix of the request ids it sends, by which an
// error frame or an ack naming one of them finds it. The connection
// (brokerconn.go) keeps the link and looks each message and frame up in the
// table the relays make; it has no case of its own for any feature.
//
// Adding a relayed feature is one file and one entry in relayList below;
// TestBrokerConnRoutesEveryFrame fails on a broker frame or a message no
// relay takes.
type relay interface {
	routes() relayRoutes
}

// relayList is the connection's relay table: one entry per relayed feature,
// in the order their start, up, down and end hooks run.
func (b *BrokerConn) relayList() []relay {
	kept := &namesRelay{b: b}
	peers, topics := &peersRelay{b: b, kept: kept}, &topicsRelay{b: b, kept: kept}
	return []relay{
		kept,                    // the names the link gave last, kept in outbox.db
		peers,                   // list_peers and the profile frames
		topics,                  // topics, and the names a `#` target resolves from
		&stateRelay{b: b},       // shared state, and its state_change events
		&skillsRelay{b: b},      // skills
		&memoryRelay{b: b},      // remember, recall, forget
		&nodesRelay{b: b},       // the mesh's nodes
		&heldRelay{b: b},        // the pull of what the broker holds for a busy recipient
		newLocksRelay(b),        // fenced locks, a session's renewed
		newReservationsRelay(b), // file reservations, a session's renewed
	}
}

// relayRoutes is what a relay takes, and what it does as the link comes
// and goes. Every field but ids may be empty.
type relayRoutes struct {
	// ids is the prefix of the _reqId of every request the relay sends
	// (reqCalls: "<ids>-N").
	ids string
	// messages are the actor messages it takes; frames the broker frames,
	// by type (each type taken by one relay).
	messages, frames []route
	// refused takes an error frame naming one of its ids, acked an ack
	// frame carrying one; each reports whether a request was waiting.
	refused func(ctx actor.Context, id string, f *messages.ErrorFrame) bool
	acked   func(ctx actor.Context, id string, f *messages.AckFrame) bool
	// start runs when the connection actor starts; up once a link is
	// established; down when it ends (fail what is in flight, forget what
	// the link knew); end when the session ends (release what it holds,
	// before the subtree stops).
	start, up, down, end func(ctx actor.Context)
}

// route is one message or frame type and the relay's handler of it.
type route struct {
	typ  reflect.Type
	take func(ctx actor.Context, v any)
}

// on is the route of the pointer type *T to take.
func on[T any](take func(actor.Context, *T)) route {
	return route{typ: reflect.TypeFor[*T](), take: func(ctx actor.Context, v any) { take(ctx, v.(*T)) }}
}

// relayTable is the relays' routes, looked up by type and by id prefix.
type relayTable struct {
	all      []relayRoutes
	messages map[reflect.Type]func(actor.Context, any)
	frames   map[reflect.Type]func(actor.Context, any)
	byIDs    map[string]*relayRoutes
}

// newRelayTable indexes the relays' routes; a type or an id prefix taken
// twice is a programming error.
func newRelayTable(relays []relay) *relayTable {
	t := &relayTable{all: make([]relayRoutes, len(relays)), messages: map[reflect.Type]func(actor.Context, any){},
		frames: map[reflect.Type]func(actor.Context, any){}, byIDs: map[string]*relayRoutes{}}
	index := func(into map[reflect.Type]func(actor.Context, any), routes []route, what string) {
		for _, r := range routes {
			if into[r.typ] != nil {
				panic(fmt.Sprintf("broker connection: %s %v taken by two relays", what, r.typ))
			}
			into[r.typ] = r.take
		}
	}
	for i, r := range relays {
		t.all[i] = r.routes()
		rr := &t.all[i]
		index(t.messages, rr.messages, "message")
		index(t.frames, rr.frames, "frame")
		if rr.ids != "" {
			if t.byIDs[rr.ids] != nil {
				panic(fmt.Sprintf("broker connection: request id prefix %q taken by two relays", rr.ids))
			}
			t.byIDs[rr.ids] = rr
		}
	}
	return t
}

// owner is the relay whose request id is id ("<ids>-N"), nil for none.
func (t *relayTable) owner(id string) *relayRoutes {
	prefix, _, ok := strings.Cut(id, "-")
	if !ok {
		return nil
	}
	return t.byIDs[prefix]
}

// refused hands an error frame to the relay whose request it names and
// reports whether one was waiting for it.
func (t *relayTable) refused(ctx actor.Context, id string, f *messages.ErrorFrame) bool {
	r := t.owner(id)
	return r != nil && r.refused != nil && r.refused(ctx, id, f)
}

// acked hands an ack frame with a _reqId to the relay whose request it
// names and reports whether one was waiting for it.
func (t *relayTable) acked(ctx actor.Context, id string, f *messages.AckFrame) bool {
	r := t.owner(id)
	return r != nil && r.acked != nil && r.acked(ctx, id, f)
}

// each runs, in table order, the hook hook picks of every relay that has
// one (atStart, atUp, atDown, atEnd).
func (t *relayTable) each(ctx actor.Context, hook func(*relayRoutes) func(actor.Context)) {
	for i := range t.all {
		if h := hook(&t.all[i]); h != nil {
			h(ctx)
		}
	}
}

// The hooks relayTable.each runs.
func atStart(r *relayRoutes) func(actor.Context) { return r.start }
func atUp(r *relayRoutes) func(actor.Context)    { return r.up }
func atDown(r *relayRoutes) func(actor.Context)  { return r.down }
func atEnd(r *relayRoutes) func(actor.Context)   { return r.end }
