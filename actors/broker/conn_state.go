package broker

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// Shared state (wire protocol §2.2). A connection sets and reads its
// mesh's state as the key it sends with (a session its session key) and
// the name it goes by. A set is pushed as state_change to every other
// connection of the mesh: this broker's through the hub, the other
// replicas' through the store's notification (PostgreSQL), which each
// broker hears and hands to its hub unless it is its own.

// hubMeshPush asks the hub to push a frame (a state_change, a
// lock_released) to the live connections of a mesh but one (except: ""
// for none).
type hubMeshPush struct {
	meshID string
	except string
	frame  []byte
}

// stateFrames are the state requests; a set tells the hub, which pushes
// state_change.
var stateFrames = frames{
	acts((*conn).setState),
	answers((*conn).getState),
	answers((*conn).listState),
}

func (c *conn) setState(ctx actor.Context, f *messages.SetStateFrame) {
	e, err := c.store.SetState(context.Background(), c.mesh.ID, c.replica, broker.StateSet{Key: f.Key, Value: f.Value,
		IfVersion: f.IfVersion, MemberID: c.member.ID, UpdatedBy: c.sender, UpdatedByName: c.displayName()})
	if err != nil {
		c.stateError(f.ReqID, f.Key, err)
		return
	}
	ctx.Send(c.hub, &hubMeshPush{meshID: c.mesh.ID, except: c.id, frame: stateChangeFrame(e)})
	if f.ReqID != "" {
		c.sendFrame(&messages.StateSetFrame{Type: messages.TypeStateSet, Key: e.Key, Version: e.Version, ReqID: f.ReqID})
	}
}

func (c *conn) getState(f *messages.GetStateFrame) {
	out := &messages.StateResultFrame{Type: messages.TypeStateResult, StateInfo: messages.StateInfo{Key: f.Key}, ReqID: f.ReqID}
	e, err := c.store.State(context.Background(), c.mesh.ID, f.Key)
	switch {
	case errors.Is(err, broker.ErrStateNotFound): // upstream's answer: value null, strings ""
	case err != nil:
		c.stateError(f.ReqID, f.Key, err)
		return
	default:
		out.StateInfo = stateInfo(e)
	}
	c.sendFrame(out)
}

func (c *conn) listState(f *messages.ListStateFrame) {
	entries, err := c.store.States(context.Background(), c.mesh.ID)
	if err != nil {
		c.stateError(f.ReqID, "", err)
		return
	}
	out := &messages.StateListFrame{Type: messages.TypeStateList, Entries: make([]messages.StateInfo, len(entries)), ReqID: f.ReqID}
	for i := range entries {
		out.Entries[i] = stateInfo(&entries[i])
	}
	c.sendFrame(out)
}

// stateError answers a refused state request with its code; a conflict
// carries the key as it is, a store failure is logged and internal.
func (c *conn) stateError(reqID, key string, err error) {
	var conflict *broker.StateConflict
	if errors.As(err, &conflict) {
		out := &messages.ErrorFrame{Type: messages.TypeError, Code: messages.CodeStateConflict, Message: err.Error(), ID: reqID, ReqID: reqID,
			State: &messages.StateInfo{Key: key}}
		if conflict.Current != nil {
			*out.State = stateInfo(conflict.Current)
		}
		c.sendFrame(out)
		return
	}
	c.sendFrame(c.refusal(reqID, err, "state", errorCode{broker.ErrInvalidStateKey, messages.CodeInvalidStateKey},
		errorCode{broker.ErrStateValueTooLarge, messages.CodeStateValueTooLarge},
		errorCode{broker.ErrInvalidStateValue, messages.CodeInvalidStateValue},
		errorCode{broker.ErrInvalidIfVersion, messages.CodeInvalidIfVersion}))
}

// errorCode is the error frame code of a store error.
type errorCode struct {
	err  error
	code string
}

// refusal is the error frame answering reqID with the code of the first of
// codes that err is, "revoked" for a revoked member; any other error is a
// store failure, logged and answered internal (what names the data: the
// mesh's state, locks).
func (c *conn) refusal(reqID string, err error, what string, codes ...errorCode) *messages.ErrorFrame {
	out := &messages.ErrorFrame{Type: messages.TypeError, Code: codeInternal, Message: err.Error(), ID: reqID, ReqID: reqID}
	for _, ec := range codes {
		if errors.Is(err, ec.err) {
			out.Code = ec.code
			return out
		}
	}
	if errors.Is(err, broker.ErrMemberRevoked) {
		out.Code, out.Message = "revoked", "this member was revoked"
		return out
	}
	c.log.Error(what+"_request_failed", "conn", c.id, "err", err)
	out.Message = "the broker could not read or write the mesh's " + what + "; try again"
	return out
}

func stateInfo(e *broker.StateEntry) messages.StateInfo {
	return messages.StateInfo{Key: e.Key, Value: e.Value, UpdatedBy: e.UpdatedByName, UpdatedByPubkey: e.UpdatedBy,
		UpdatedAt: isoTime(e.UpdatedAt), Version: e.Version}
}

func stateChangeFrame(e *broker.StateEntry) []byte {
	data, _ := json.Marshal(&messages.StateChangeFrame{Type: messages.TypeStateChange, StateInfo: stateInfo(e)}) // always marshals
	return data
}

// meshPush pushes a frame to the mesh's live connections but the one that
// caused it.
func (h *hub) meshPush(m *hubMeshPush) {
	for id, p := range h.byMesh[m.meshID] {
		if !p.offline && id != m.except {
			p.link.Send(m.frame)
		}
	}
}

// listenWait bounds how long a broker's start waits for each of its
// LISTENs on PostgreSQL; past it the broker serves, and its connections
// miss the other replicas' notifications of that kind until it is up.
const listenWait = 5 * time.Second

// listenState hands the other replicas' state changes to the hub until
// ctx is done.
func listenState(ctx context.Context, d *deps, root *actor.RootContext) {
	startListening(ctx, d, "state", func(connected func()) {
		_ = d.store.ListenState(ctx, connected, func(c *broker.StateChange) {
			if c.Origin != d.replica {
				root.Send(d.hub, &hubMeshPush{meshID: c.MeshID, frame: stateChangeFrame(c.Entry)})
			}
		})
	})
}

// startListening runs listen in a goroutine; on PostgreSQL it returns once
// listen calls connected (at most listenWait), so that a connection the
// broker accepts hears every later notification. Each later call of
// connected is a reconnect, counted by channel.
func startListening(ctx context.Context, d *deps, what string, listen func(connected func())) {
	listening := make(chan struct{})
	var once sync.Once
	reconnected := d.metrics.listened(what)
	go listen(func() { reconnected(); once.Do(func() { close(listening) }) })
	if d.store.Backend() != "postgres" {
		return
	}
	select {
	case <-listening:
	case <-time.After(listenWait):
		d.log.Warn("listen_slow", "channel", what, "detail", "serving before the LISTEN is up: other replicas' notifications are missed until it is")
	case <-ctx.Done():
	}
}
