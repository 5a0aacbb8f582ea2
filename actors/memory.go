package actors

import (
	"cmp"
	"fmt"
	"net/http"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
)

// MemoryTimeout is how long a memory request waits for the broker's answer.
const MemoryTimeout = 10 * time.Second

// Memory on a mesh's broker connection: the IPC's remember, recall and
// forget relayed as frames correlated by _reqId (messages/memory_frames.go).
// forget is answered by an ack; ours echoes the _reqId, which the reader
// hands to this actor, while an upstream broker's ack carries none and the
// forget times out (504) although the broker did it.

type memoryCall struct {
	who *actor.PID
	op  string
}

// memoryExpired is the timer of the request id.
type memoryExpired struct{ id string }

// memoryRequest sends the frame of one request; the answer comes back
// through memoryFrame, or the timer fires.
func (b *BrokerConn) memoryRequest(ctx actor.Context, m *messages.MemoryRequest) {
	id := b.memory.call("mm", &memoryCall{who: ctx.Sender(), op: m.Op})
	var frame any
	switch m.Op {
	case messages.TypeRemember:
		frame = &messages.RememberFrame{Type: m.Op, Content: m.Content, Tags: m.Tags, ReqID: id}
	case messages.TypeRecall:
		frame = &messages.RecallFrame{Type: m.Op, Query: m.Query, Tags: m.Tags, Limit: m.Limit, ReqID: id}
	case messages.TypeForget:
		frame = &messages.ForgetFrame{Type: m.Op, MemoryID: m.ID, ReqID: id}
	default:
		b.memoryAnswer(ctx, id, fmt.Errorf("unknown memory request %q", m.Op))
		return
	}
	if err := b.send(frame); err != nil {
		b.memoryAnswer(ctx, id, err)
		return
	}
	workers.SendLater(ctx, MemoryTimeout, &memoryExpired{id: id})
}

// memoryFrame takes a broker's answer to a memory request: memory_stored,
// memory_results, forget's ack or an error frame naming one. It reports
// false for a frame that answers none.
func (b *BrokerConn) memoryFrame(ctx actor.Context, f any) bool {
	switch f := f.(type) {
	case *messages.MemoryStoredFrame:
		return b.memoryAnswer(ctx, f.ReqID, &messages.MemoryReply{ID: f.ID})
	case *messages.MemoryResultsFrame:
		return b.memoryAnswer(ctx, f.ReqID, &messages.MemoryReply{Memories: f.Memories})
	case *messages.AckFrame:
		return f.ReqID != nil && b.memoryAnswer(ctx, *f.ReqID, &messages.MemoryReply{ID: f.ID})
	case *messages.ErrorFrame:
		id := cmp.Or(f.ReqID, f.ID)
		call := b.memory.pending[id]
		if call == nil {
			return false
		}
		err := b.brokerRefused(f)
		switch f.Code {
		case "invalid_args":
			err = refusedInput(messages.CodeInvalidMemory, f)
		case "unknown_message_type":
			err = &messages.Error{Status: http.StatusNotImplemented, Code: "unsupported_by_broker",
				Detail: fmt.Sprintf("the broker of mesh %s does not know %s: it keeps no memory", b.cfg.Slug, call.op)}
		}
		return b.memoryAnswer(ctx, id, err)
	}
	return false
}

func (b *BrokerConn) memoryExpired(ctx actor.Context, m *memoryExpired) {
	if call := b.memory.pending[m.id]; call != nil {
		b.memoryAnswer(ctx, m.id, messages.BrokerTimedOut(b.cfg.Slug, call.op, MemoryTimeout))
	}
}

// memoryDown fails every request in flight: the connection is gone.
func (b *BrokerConn) memoryDown(ctx actor.Context) {
	for _, call := range b.memory.drain() {
		ctx.Send(call.who, &messages.MemoryReply{Err: ErrNotConnected})
	}
}

// memoryAnswer sends the call of id its reply (a *messages.MemoryReply or
// an error) and reports whether there was one.
func (b *BrokerConn) memoryAnswer(ctx actor.Context, id string, res any) bool {
	call, ok := b.memory.take(id)
	if !ok {
		return false
	}
	if err, ok := res.(error); ok {
		res = &messages.MemoryReply{Err: err}
	}
	ctx.Send(call.who, res)
	return true
}
