package actors

import (
	"fmt"
	"net/http"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/wsclient"
)

// Held messages on a broker link: a pull (messages.PullHeld, asked
// before a session's inbox is listed) relayed as drain_held, correlated
// by _reqId, to a broker that advertised the ability; one that did not
// (upstream's, a legacy connection) is not asked. The broker pushes what
// it held and then answers; the reader hands the pushes to the inbox and
// the answer here, so the pull is answered only once the inbox has stored
// every push it took before the answer (inboxFlush). What the pull does
// not settle within messages.HeldPullTimeout is answered as timed out.
type heldRelay struct {
	b     *BrokerConn
	calls asks[*messages.PullHeld]
}

// heldIDs prefixes the _reqId of a drain_held.
const heldIDs = "hd"

// heldExpired is the timer of the request id.
type heldExpired struct{ id string }

func (r *heldRelay) routes() relayRoutes {
	return relayRoutes{ids: heldIDs,
		messages: []route{on(r.pull), on(r.stored), on(r.expired)},
		frames:   []route{on(r.drained)},
		refused:  r.refused,
		down:     r.down,
	}
}

func (r *heldRelay) pull(ctx actor.Context, m *messages.PullHeld) {
	if r.b.lacks(wsclient.AbilityHeld) {
		ctx.Respond(&messages.HeldPulled{Err: &messages.Error{Status: http.StatusNotImplemented, Code: "held_unsupported",
			Detail: fmt.Sprintf("the broker of mesh %s holds messages without a way to pull them (it is upstream's, or older "+
				"than claudemesh's drain_held): they arrive when the recipient is idle", r.b.cfg.Slug)}})
		return
	}
	id := r.calls.ask(heldIDs, ctx.Sender(), m)
	if err := r.b.send(&messages.DrainHeldFrame{Type: messages.TypeDrainHeld, ReqID: id}); err != nil {
		r.calls.answer(ctx, id, &messages.HeldPulled{Err: err})
		return
	}
	workers.SendLater(ctx, messages.HeldPullTimeout, &heldExpired{id: id})
}

// drained has the inbox settle the pushes that came before the answer;
// the call stays in flight until it has (stored).
func (r *heldRelay) drained(ctx actor.Context, f *messages.HeldDrainedFrame) {
	if _, ok := r.calls.pending[f.ReqID]; ok {
		ctx.Request(r.b.inbox, &inboxFlush{id: f.ReqID, pushed: f.Pushed, more: f.More})
	}
}

func (r *heldRelay) stored(ctx actor.Context, m *inboxFlushed) {
	r.calls.answer(ctx, m.id, &messages.HeldPulled{Pushed: m.pushed, More: m.more})
}

func (r *heldRelay) refused(ctx actor.Context, id string, f *messages.ErrorFrame) bool {
	return r.calls.answer(ctx, id, &messages.HeldPulled{Err: r.b.brokerRefused(f)})
}

func (r *heldRelay) expired(ctx actor.Context, m *heldExpired) {
	r.calls.answer(ctx, m.id, &messages.HeldPulled{Err: messages.BrokerTimedOut(r.b.cfg.Slug, messages.TypeDrainHeld,
		messages.HeldPullTimeout)})
}

// down fails every pull in flight: the connection is gone.
func (r *heldRelay) down(ctx actor.Context) {
	r.calls.answerAll(ctx, func() any { return &messages.HeldPulled{Err: ErrNotConnected} })
}
