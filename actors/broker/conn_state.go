package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// Shared state (wire protocol §2.2). A connection sets and reads its
// mesh's state as the key it sends with (a session its session key) and
// the name it goes by. A set is pushed as state_change to every other
// connection of the mesh: this broker's through the hub, the other
// replicas' through the store's notification (PostgreSQL), which each
// broker hears and hands to its hub unless it is its own.

// hubStateChange asks the hub to push a state_change frame to the live
// connections of a mesh but one (except: "" for none).
type hubStateChange struct {
	meshID string
	except string
	frame  []byte
}

func (c *conn) setState(ctx actor.Context, f *messages.SetStateFrame) {
	e, err := c.store.SetState(context.Background(), c.mesh.ID, c.replica, broker.StateSet{Key: f.Key, Value: f.Value,
		IfVersion: f.IfVersion, MemberID: c.member.ID, UpdatedBy: c.sender, UpdatedByName: c.displayName()})
	if err != nil {
		c.stateError(f.ReqID, f.Key, err)
		return
	}
	ctx.Send(c.hub, &hubStateChange{meshID: c.mesh.ID, except: c.id, frame: stateChangeFrame(e)})
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
	out := &messages.ErrorFrame{Type: messages.TypeError, Code: codeInternal, Message: err.Error(), ID: reqID, ReqID: reqID}
	var conflict *broker.StateConflict
	switch {
	case errors.As(err, &conflict):
		out.Code, out.State = messages.CodeStateConflict, &messages.StateInfo{Key: key}
		if conflict.Current != nil {
			*out.State = stateInfo(conflict.Current)
		}
	case errors.Is(err, broker.ErrInvalidStateKey):
		out.Code = messages.CodeInvalidStateKey
	case errors.Is(err, broker.ErrStateValueTooLarge):
		out.Code = messages.CodeStateValueTooLarge
	case errors.Is(err, broker.ErrInvalidStateValue):
		out.Code = messages.CodeInvalidStateValue
	case errors.Is(err, broker.ErrInvalidIfVersion):
		out.Code = messages.CodeInvalidIfVersion
	case errors.Is(err, broker.ErrMemberRevoked):
		out.Code, out.Message = "revoked", "this member was revoked"
	default:
		c.log.Error("state_request_failed", "conn", c.id, "err", err)
		out.Message = "the broker could not read or write the mesh's state; try again"
	}
	c.sendFrame(out)
}

func stateInfo(e *broker.StateEntry) messages.StateInfo {
	return messages.StateInfo{Key: e.Key, Value: e.Value, UpdatedBy: e.UpdatedByName, UpdatedByPubkey: e.UpdatedBy,
		UpdatedAt: isoTime(e.UpdatedAt), Version: e.Version}
}

func stateChangeFrame(e *broker.StateEntry) []byte {
	data, _ := json.Marshal(&messages.StateChangeFrame{Type: messages.TypeStateChange, StateInfo: stateInfo(e)}) // always marshals
	return data
}

// stateChange pushes a state change to the mesh's live connections but the
// one that set it.
func (h *hub) stateChange(m *hubStateChange) {
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

// listenState names this broker in the store's state notifications and
// hands the other replicas' changes to the hub until ctx is done.
func listenState(ctx context.Context, d *deps, root *actor.RootContext) {
	d.replica = fmt.Sprintf("broker-%s", ulid.Make())
	startListening(ctx, d, "state", func(connected func()) {
		_ = d.store.ListenState(ctx, connected, func(c *broker.StateChange) {
			if c.Origin != d.replica {
				root.Send(d.hub, &hubStateChange{meshID: c.MeshID, frame: stateChangeFrame(c.Entry)})
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
