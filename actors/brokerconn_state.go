package actors

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
)

// StateTimeout is how long a state request waits for the broker's answer
// (upstream's daemon waits 5 s for its RPCs).
const StateTimeout = 5 * time.Second

// Shared state on a mesh's broker link (wire protocol §2.2). The relay
// sends the IPC's state requests as frames correlated by _reqId, and turns
// the state_change frames the broker pushes into the event state_change
// (SSE on /v1/events). A set carries _reqId so that our broker answers it
// (state_set, or an error); upstream's broker answers a set nothing, so
// against it (a legacy connection) a set is sent without one and answered
// at once, and a compare-and-set is refused.
type stateRelay struct {
	b     *BrokerConn
	calls asks[*messages.StateRequest]
}

// stateIDs prefixes the _reqId of a state request.
const stateIDs = "st"

// stateExpired is the timer of the request id.
type stateExpired struct{ id string }

// errStateTimeout is a state request the broker did not answer in time.
var errStateTimeout = errors.New("the broker did not answer the state request in time")

func (r *stateRelay) routes() relayRoutes {
	return relayRoutes{ids: stateIDs,
		messages: []route{on(r.request), on(r.expired)},
		frames:   []route{on(r.result), on(r.list), on(r.set), on(r.changed)},
		refused:  r.refused,
		down:     r.down,
	}
}

// request sends the request's frame; the answer comes back as a frame or
// an error, or the timer fires.
func (r *stateRelay) request(ctx actor.Context, m *messages.StateRequest) {
	if r.b.session != nil && r.b.session.Legacy && m.Op == messages.TypeSetState {
		r.legacySet(ctx, m)
		return
	}
	id := r.calls.ask(stateIDs, ctx.Sender(), m)
	var frame any
	switch m.Op {
	case messages.TypeGetState:
		frame = &messages.GetStateFrame{Type: m.Op, Key: m.Key, ReqID: id}
	case messages.TypeListState:
		frame = &messages.ListStateFrame{Type: m.Op, ReqID: id}
	default:
		frame = &messages.SetStateFrame{Type: messages.TypeSetState, Key: m.Key, Value: m.Value, IfVersion: m.IfVersion, ReqID: id}
	}
	if err := r.b.send(frame); err != nil {
		r.calls.answer(ctx, id, &messages.StateReply{Err: err})
		return
	}
	workers.SendLater(ctx, StateTimeout, &stateExpired{id: id})
}

// legacySet sends a set as upstream's clients do, without _reqId, and
// answers it sent (version unknown); a compare-and-set it cannot keep is
// refused before anything is sent.
func (r *stateRelay) legacySet(ctx actor.Context, m *messages.StateRequest) {
	if m.IfVersion != nil {
		ctx.Respond(&messages.StateReply{Err: &messages.Error{Status: http.StatusNotImplemented, Code: "state_cas_unsupported",
			Detail: fmt.Sprintf("the broker of mesh %s is upstream's, which has no state versions: set without --if-version", r.b.cfg.Slug)}})
		return
	}
	err := r.b.send(&messages.SetStateFrame{Type: messages.TypeSetState, Key: m.Key, Value: m.Value})
	ctx.Respond(&messages.StateReply{Err: err})
}

func (r *stateRelay) result(ctx actor.Context, f *messages.StateResultFrame) {
	r.calls.answer(ctx, f.ReqID, &messages.StateReply{Entry: &f.StateInfo})
}

func (r *stateRelay) list(ctx actor.Context, f *messages.StateListFrame) {
	r.calls.answer(ctx, f.ReqID, &messages.StateReply{Entries: f.Entries})
}

func (r *stateRelay) set(ctx actor.Context, f *messages.StateSetFrame) {
	r.calls.answer(ctx, f.ReqID, &messages.StateReply{Version: f.Version})
}

// changed turns a pushed state_change into the event state_change.
func (r *stateRelay) changed(ctx actor.Context, f *messages.StateChangeFrame) {
	r.b.event(ctx, messages.TypeStateChange, &messages.StateView{Mesh: r.b.cfg.Slug, StateInfo: f.StateInfo})
}

// refused answers the request an error frame names.
func (r *stateRelay) refused(ctx actor.Context, id string, f *messages.ErrorFrame) bool {
	call := r.calls.pending[id]
	if call == nil {
		return false
	}
	var err error
	switch f.Code {
	case messages.CodeStateConflict:
		current := messages.StateInfo{Key: call.req.Key}
		if f.State != nil {
			current = *f.State
		}
		err = messages.StateConflict(r.b.cfg.Slug, *cmp.Or(call.req.IfVersion, new(int64)), current)
	case messages.CodeInvalidStateKey, messages.CodeInvalidStateValue, messages.CodeInvalidIfVersion:
		err = refusedInput(f.Code, f)
	case "revoked":
		err = r.b.revokedError()
	case messages.CodeStateValueTooLarge:
		err = &messages.Error{Status: http.StatusRequestEntityTooLarge, Code: f.Code, Detail: "the broker refused it: " + f.Message}
	default:
		err = r.b.brokerRefused(f)
	}
	return r.calls.answer(ctx, id, &messages.StateReply{Err: err})
}

func (r *stateRelay) expired(ctx actor.Context, m *stateExpired) {
	r.calls.answer(ctx, m.id, &messages.StateReply{Err: &messages.Error{Status: http.StatusGatewayTimeout,
		Code: "state_timeout", Detail: fmt.Sprintf("mesh %s: %v (%s); retry, and check `claudemesh daemon status`", r.b.cfg.Slug,
			errStateTimeout, StateTimeout)}})
}

// down fails every request in flight: the connection is gone.
func (r *stateRelay) down(ctx actor.Context) {
	r.calls.answerAll(ctx, func() any { return &messages.StateReply{Err: ErrNotConnected} })
}
