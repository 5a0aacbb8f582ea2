package actors

import (
	"fmt"
	"net/http"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
)

// MemoryTimeout is how long a memory request waits for the broker's answer.
const MemoryTimeout = 10 * time.Second

// Memory on a mesh's broker link: the IPC's remember, recall and forget
// relayed as frames correlated by _reqId (messages/memory_frames.go).
// forget is answered by an ack; ours echoes the _reqId, which the reader
// hands to the connection, while an upstream broker's ack carries none and
// the forget times out (504) although the broker did it.
type memoryRelay struct {
	b     *BrokerConn
	calls asks[*messages.MemoryRequest]
}

// memoryIDs prefixes the _reqId of a memory request.
const memoryIDs = "mm"

// memoryExpired is the timer of the request id.
type memoryExpired struct{ id string }

func (r *memoryRelay) routes() relayRoutes {
	return relayRoutes{ids: memoryIDs,
		messages: []route{on(r.request), on(r.expired)},
		frames:   []route{on(r.stored), on(r.results)},
		refused:  r.refused,
		acked:    r.forgotten,
		down:     r.down,
	}
}

// request sends the frame of one request; the answer comes back as a
// frame, an ack or an error, or the timer fires.
func (r *memoryRelay) request(ctx actor.Context, m *messages.MemoryRequest) {
	id := r.calls.ask(memoryIDs, ctx.Sender(), m)
	var frame any
	switch m.Op {
	case messages.TypeRemember:
		frame = &messages.RememberFrame{Type: m.Op, Content: m.Content, Tags: m.Tags, ReqID: id}
	case messages.TypeRecall:
		frame = &messages.RecallFrame{Type: m.Op, Query: m.Query, Tags: m.Tags, Limit: m.Limit, ReqID: id}
	case messages.TypeForget:
		frame = &messages.ForgetFrame{Type: m.Op, MemoryID: m.ID, ReqID: id}
	default:
		r.calls.answer(ctx, id, &messages.MemoryReply{Err: fmt.Errorf("unknown memory request %q", m.Op)})
		return
	}
	if err := r.b.send(frame); err != nil {
		r.calls.answer(ctx, id, &messages.MemoryReply{Err: err})
		return
	}
	workers.SendLater(ctx, MemoryTimeout, &memoryExpired{id: id})
}

func (r *memoryRelay) stored(ctx actor.Context, f *messages.MemoryStoredFrame) {
	r.calls.answer(ctx, f.ReqID, &messages.MemoryReply{ID: f.ID})
}

func (r *memoryRelay) results(ctx actor.Context, f *messages.MemoryResultsFrame) {
	r.calls.answer(ctx, f.ReqID, &messages.MemoryReply{Memories: f.Memories})
}

// forgotten takes the ack that answers a forget.
func (r *memoryRelay) forgotten(ctx actor.Context, id string, f *messages.AckFrame) bool {
	return r.calls.answer(ctx, id, &messages.MemoryReply{ID: f.ID})
}

func (r *memoryRelay) refused(ctx actor.Context, id string, f *messages.ErrorFrame) bool {
	call := r.calls.pending[id]
	if call == nil {
		return false
	}
	err := r.b.brokerRefused(f)
	switch f.Code {
	case "invalid_args":
		err = refusedInput(messages.CodeInvalidMemory, f)
	case "unknown_message_type":
		err = &messages.Error{Status: http.StatusNotImplemented, Code: "unsupported_by_broker",
			Detail: fmt.Sprintf("the broker of mesh %s does not know %s: it keeps no memory", r.b.cfg.Slug, call.req.Op)}
	}
	return r.calls.answer(ctx, id, &messages.MemoryReply{Err: err})
}

func (r *memoryRelay) expired(ctx actor.Context, m *memoryExpired) {
	if call := r.calls.pending[m.id]; call != nil {
		r.calls.answer(ctx, m.id, &messages.MemoryReply{Err: messages.BrokerTimedOut(r.b.cfg.Slug, call.req.Op, MemoryTimeout)})
	}
}

// down fails every request in flight: the connection is gone.
func (r *memoryRelay) down(ctx actor.Context) {
	r.calls.answerAll(ctx, func() any { return &messages.MemoryReply{Err: ErrNotConnected} })
}
