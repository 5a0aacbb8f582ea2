package broker

import (
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
)

// batcher is group commit for the broker's store: every request it
// receives is queued, and the first of a batch sends the batcher a flush
// marker; when the marker comes up (every request that arrived before it has
// joined), run executes the whole batch in one transaction and each sender
// gets its result, in order. A batch also runs when it reaches max.
type batcher[Req, Res any] struct {
	name  string
	run   func([]Req) []Res
	max   int
	log   *slog.Logger
	reqs  []Req
	from  []*actor.PID
	queue bool
}

// batchOf wraps one request for a batcher.
type batchOf[Req any] struct{ req Req }

// batchFlush is a batcher's end-of-drain marker.
type batchFlush struct{}

func newBatcher[Req, Res any](name string, max int, run func([]Req) []Res, log *slog.Logger) actor.Producer {
	return func() actor.Actor {
		return &batcher[Req, Res]{name: name, run: run, max: max, log: log.With("actor", name)}
	}
}

func (b *batcher[Req, Res]) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	case *batchOf[Req]:
		b.reqs = append(b.reqs, msg.req)
		b.from = append(b.from, ctx.Sender())
		if len(b.reqs) >= b.max {
			b.flush(ctx)
		} else if !b.queue {
			b.queue = true
			ctx.Send(ctx.Self(), &batchFlush{})
		}
	case *batchFlush:
		b.queue = false
		b.flush(ctx)
	default:
		b.log.Warn("unhandled message", "type", fmt.Sprintf("%T", msg))
	}
}

func (b *batcher[Req, Res]) flush(ctx actor.Context) {
	if len(b.reqs) == 0 {
		return
	}
	results := b.run(b.reqs)
	for i, to := range b.from {
		if to != nil {
			ctx.Send(to, &batchResult[Res]{res: results[i]})
		}
	}
	clear(b.reqs)
	clear(b.from)
	b.reqs, b.from = b.reqs[:0], b.from[:0]
}

// batchResult carries one request's result back to its sender.
type batchResult[Res any] struct{ res Res }
