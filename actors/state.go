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

// Shared state on a mesh's broker connection (wire protocol §2.2). The
// connection relays the IPC's state requests as frames correlated by
// _reqId, and turns the state_change frames the broker pushes into the
// event state_change (SSE on /v1/events). A set carries _reqId so that our
// broker answers it (state_set, or an error); upstream's broker answers a
// set nothing, so against it (a legacy connection) a set is sent without
// one and answered at once, and a compare-and-set is refused.

// stateCalls are a connection's state requests in flight, by _reqId.
type stateCalls = reqCalls[*stateCall]

// stateCall is one request in flight.
type stateCall struct {
	who *actor.PID
	req *messages.StateRequest
}

// stateExpired is the timer of the request id.
type stateExpired struct{ id string }

// errStateTimeout is a state request the broker did not answer in time.
var errStateTimeout = errors.New("the broker did not answer the state request in time")

// stateRequest sends the request's frame; the answer comes back as a frame
// (stateFrame) or an error (stateError), or the timer fires.
func (b *BrokerConn) stateRequest(ctx actor.Context, m *messages.StateRequest) {
	legacy := b.session != nil && b.session.Legacy
	if legacy && m.Op == messages.TypeSetState {
		b.legacySetState(ctx, m)
		return
	}
	id := b.state.call("st", &stateCall{who: ctx.Sender(), req: m})
	var frame any
	switch m.Op {
	case messages.TypeGetState:
		frame = &messages.GetStateFrame{Type: m.Op, Key: m.Key, ReqID: id}
	case messages.TypeListState:
		frame = &messages.ListStateFrame{Type: m.Op, ReqID: id}
	default:
		frame = &messages.SetStateFrame{Type: messages.TypeSetState, Key: m.Key, Value: m.Value, IfVersion: m.IfVersion, ReqID: id}
	}
	if err := b.send(frame); err != nil {
		b.stateAnswer(ctx, b.takeState(id), &messages.StateReply{Err: err})
		return
	}
	workers.SendLater(ctx, StateTimeout, &stateExpired{id: id})
}

// legacySetState sends a set as upstream's clients do, without _reqId, and
// answers it sent (version unknown); a compare-and-set it cannot keep is
// refused before anything is sent.
func (b *BrokerConn) legacySetState(ctx actor.Context, m *messages.StateRequest) {
	if m.IfVersion != nil {
		ctx.Respond(&messages.StateReply{Err: &messages.Error{Status: http.StatusNotImplemented, Code: "state_cas_unsupported",
			Detail: fmt.Sprintf("the broker of mesh %s is upstream's, which has no state versions: set without --if-version", b.cfg.Slug)}})
		return
	}
	err := b.send(&messages.SetStateFrame{Type: messages.TypeSetState, Key: m.Key, Value: m.Value})
	ctx.Respond(&messages.StateReply{Err: err})
}

// stateFrame takes a broker's state frame, or an error frame answering a
// state request; it reports false for a frame that is neither.
func (b *BrokerConn) stateFrame(ctx actor.Context, f any) bool {
	switch f := f.(type) {
	case *messages.ErrorFrame:
		return b.stateError(ctx, f)
	case *messages.StateResultFrame:
		b.stateAnswer(ctx, b.takeState(f.ReqID), &messages.StateReply{Entry: &f.StateInfo})
	case *messages.StateListFrame:
		b.stateAnswer(ctx, b.takeState(f.ReqID), &messages.StateReply{Entries: f.Entries})
	case *messages.StateSetFrame:
		b.stateAnswer(ctx, b.takeState(f.ReqID), &messages.StateReply{Version: f.Version})
	case *messages.StateChangeFrame:
		b.event(ctx, messages.TypeStateChange, &messages.StateView{Mesh: b.cfg.Slug, StateInfo: f.StateInfo})
	default:
		return false
	}
	return true
}

// stateError answers the request an error frame names; it reports false
// for an error of no state request.
func (b *BrokerConn) stateError(ctx actor.Context, f *messages.ErrorFrame) bool {
	call, ok := b.state.take(cmp.Or(f.ReqID, f.ID))
	if !ok {
		return false
	}
	var err error
	switch f.Code {
	case messages.CodeStateConflict:
		current := messages.StateInfo{Key: call.req.Key}
		if f.State != nil {
			current = *f.State
		}
		err = messages.StateConflict(b.cfg.Slug, *cmp.Or(call.req.IfVersion, new(int64)), current)
	case messages.CodeInvalidStateKey, messages.CodeInvalidStateValue, messages.CodeInvalidIfVersion:
		err = refusedInput(f.Code, f)
	case "revoked":
		err = &messages.Error{Status: http.StatusForbidden, Code: messages.CodeMemberRevoked,
			Detail: fmt.Sprintf("the broker of mesh %s refused this member's key as revoked: ask the mesh's operator for a new invite", b.cfg.Slug)}
	case messages.CodeStateValueTooLarge:
		err = &messages.Error{Status: http.StatusRequestEntityTooLarge, Code: f.Code, Detail: "the broker refused it: " + f.Message}
	default:
		err = b.brokerRefused(f)
	}
	b.stateAnswer(ctx, call, &messages.StateReply{Err: err})
	return true
}

func (b *BrokerConn) stateExpired(ctx actor.Context, m *stateExpired) {
	b.stateAnswer(ctx, b.takeState(m.id), &messages.StateReply{Err: &messages.Error{Status: http.StatusGatewayTimeout,
		Code: "state_timeout", Detail: fmt.Sprintf("mesh %s: %v (%s); retry, and check `claudemesh daemon status`", b.cfg.Slug,
			errStateTimeout, StateTimeout)}})
}

// stateDown fails every request in flight: the connection is gone.
func (b *BrokerConn) stateDown(ctx actor.Context) {
	for _, call := range b.state.drain() {
		b.stateAnswer(ctx, call, &messages.StateReply{Err: ErrNotConnected})
	}
}

// takeState removes and returns the call of id (nil: none, or already
// answered).
func (b *BrokerConn) takeState(id string) *stateCall {
	call, _ := b.state.take(id)
	return call
}

func (b *BrokerConn) stateAnswer(ctx actor.Context, call *stateCall, reply *messages.StateReply) {
	if call != nil {
		ctx.Send(call.who, reply)
	}
}
