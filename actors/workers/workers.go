// Package workers is how the daemon's and the broker's actors run: the
// worker pool their mailboxes run on (Props), the inline dispatch of the
// actors whose handlers never block (InlineProps), the timer that sends
// an actor a message later (SendLater), and the wait of the goroutines
// beside them that gather work before a costly step (Gather).
//
// The pool: protoactor's default starts a new goroutine every time a
// mailbox that was empty gets a message, and a new goroutine starts with a
// small stack. The actors that call into SQLite (modernc.org/sqlite is C
// translated to Go, with deep frames) grew and copied that stack again on
// nearly every message. Here a mailbox runs on a worker goroutine that,
// once done, waits for the next mailbox to run, its stack already grown.
package workers

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers/gopool"
)

// Throughput is how many messages a mailbox processes before it yields its
// worker (protoactor's default).
const Throughput = 300

// MaxIdle is how many workers may wait for work at once; a worker that
// finds that many waiting ends. A burst of mailboxes (a thousand broker
// connections at once) leaves no more goroutines behind than this.
const MaxIdle = 64

// Pool runs each scheduled mailbox on a waiting worker, or on a new worker
// when none waits — never after another mailbox, so an actor that blocks
// holds up only itself. (protoactor calls this a dispatcher; the outbox's
// Dispatcher actor is another thing.)
var Pool actor.Dispatcher = dispatcher{gopool.New(MaxIdle)}

type dispatcher struct{ *gopool.Pool }

func (d dispatcher) Schedule(fn func()) { d.Go(fn) }

func (dispatcher) Throughput() int { return Throughput }

// Props is actor.PropsFromProducer for an actor that runs on Pool.
func Props(p actor.Producer) *actor.Props {
	return actor.PropsFromProducer(p, actor.WithDispatcher(Pool))
}

// InlineProps is actor.PropsFromProducer for an actor whose every handler
// is short and never blocks (a few map updates and sends): its mailbox runs
// on the goroutine of whoever sends it a message — an HTTP handler, a
// connection's reader, a WAL syncer, another actor — instead of being handed
// to a worker, which costs a goroutine wake-up per message. The mailbox
// still runs one message at a time: a sender that finds it running only
// queues its message for the goroutine already running it.
func InlineProps(p actor.Producer) *actor.Props {
	return actor.PropsFromProducer(p, actor.WithDispatcher(inline))
}

var inline = actor.NewSynchronizedDispatcher(Throughput)

// SendLater sends msg to ctx's own actor after d, and returns the timer:
// Stop cancels it, Reset sends msg again after a new delay. It is how every
// actor asks to be woken later.
func SendLater(ctx actor.Context, d time.Duration, msg any) *time.Timer {
	root, self := ctx.ActorSystem().Root, ctx.Self()
	return time.AfterFunc(d, func() { root.Send(self, msg) })
}
