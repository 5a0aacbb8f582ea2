package broker

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
)

// batcher is group commit for the broker's store: every request it
// receives is queued, and the first of a batch sends the batcher a flush
// marker; when the marker comes up (every request that arrived before it has
// joined), run executes the whole batch in one transaction and each sender
// gets its result, in order. A batch also runs when it reaches max.
//
// Requests for which hold is true (their results go to no one) wait up to
// holdFor for a batch to join before they run on their own: client acks
// then ride along with the accepts instead of costing a transaction each.
//
// With a durability, run commits without an fsync and the results wait
// for one on a replySyncer, so that the next batch commits meanwhile.
type batcher[Req, Res any] struct {
	name    string
	run     func([]Req) []Res
	max     int
	hold    func(Req) bool
	holdFor time.Duration
	log     *slog.Logger
	reqs    []Req
	from    []*actor.PID
	queue   bool
	held    []Req
	holding bool // a timer will flush the held requests
	durable *durability[Res]
	syncer  *replySyncer[Res] // with durable, between Started and Stopped
}

// batchOf wraps one request for a batcher.
type batchOf[Req any] struct{ req Req }

// batchFlush is a batcher's end-of-drain marker; heldFlush is its holdFor
// timer.
type (
	batchFlush struct{}
	heldFlush  struct{}
)

// flushThen makes a batcher run every request it has (held ones included),
// then send msg to to: what msg sets off sees them committed.
type flushThen struct {
	to  *actor.PID
	msg any
}

func newBatcher[Req, Res any](name string, max int, run func([]Req) []Res, hold func(Req) bool, holdFor time.Duration,
	durable *durability[Res], log *slog.Logger) actor.Producer {
	return func() actor.Actor {
		return &batcher[Req, Res]{name: name, run: run, max: max, hold: hold, holdFor: holdFor, durable: durable,
			log: log.With("actor", name)}
	}
}

func (b *batcher[Req, Res]) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		if b.durable != nil {
			b.syncer = startReplySyncer(b.durable, ctx.ActorSystem().Root, ctx.Self(), b.log)
		}
	case *actor.Restarting:
	case *actor.Stopping:
		b.commit(ctx) // held requests
	case *actor.Stopped:
		if b.syncer != nil {
			b.syncer.close() // what the last batches owe
		}
	case *batchOf[Req]:
		if b.hold != nil && b.hold(msg.req) {
			b.keep(ctx, msg.req)
			return
		}
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
	case *heldFlush:
		b.holding = false
		b.flush(ctx)
	case *flushThen:
		b.commit(ctx)
		ctx.Send(msg.to, msg.msg)
	default:
		b.log.Warn("unhandled message", "type", fmt.Sprintf("%T", msg))
	}
}

// keep holds req (its result goes to no one) for the next batch, arming
// the timer if none is armed; a full hold runs at once.
func (b *batcher[Req, Res]) keep(ctx actor.Context, req Req) {
	b.held = append(b.held, req)
	if len(b.held) >= b.max {
		b.flush(ctx)
		return
	}
	if !b.holding {
		b.holding = true
		workers.SendLater(ctx, b.holdFor, &heldFlush{})
	}
}

// flush runs every request the batcher has, unless its replySyncer holds
// the batch back (an fsync runs with a batch behind it already): then the
// syncer sends a batchFlush when it may run.
func (b *batcher[Req, Res]) flush(ctx actor.Context) {
	if b.syncer != nil && len(b.reqs)+len(b.held) > 0 && !b.syncer.mayCommit() {
		return
	}
	b.commit(ctx)
}

// commit runs every request the batcher has (held ones included).
func (b *batcher[Req, Res]) commit(ctx actor.Context) {
	for _, req := range b.held {
		b.reqs = append(b.reqs, req)
		b.from = append(b.from, nil)
	}
	clear(b.held)
	b.held = b.held[:0]
	if len(b.reqs) == 0 {
		return
	}
	results := b.run(b.reqs)
	if b.syncer != nil {
		b.syncer.owe(b.from, results)
	} else {
		for i, to := range b.from {
			if to != nil {
				ctx.Send(to, &batchResult[Res]{res: results[i]})
			}
		}
	}
	clear(b.reqs)
	clear(b.from)
	b.reqs, b.from = b.reqs[:0], b.from[:0]
}

// batchResult carries one request's result back to its sender.
type batchResult[Res any] struct{ res Res }
