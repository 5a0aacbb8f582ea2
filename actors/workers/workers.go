// Package workers is the dispatcher the actors on the message path run on:
// protoactor's default starts a new goroutine every time a mailbox that was
// empty gets a message, and a new goroutine starts with a small stack. The
// actors that call into SQLite (modernc.org/sqlite is C translated to Go,
// with deep frames) grew and copied that stack again on nearly every
// message: 6–8 % of the broker's CPU and of the receiving daemon's at
// 1,000 msgs/s (docs/BENCHMARKS.md). Here a mailbox runs on a worker
// goroutine that, once done, waits for the next mailbox to run, its stack
// already grown.
package workers

import "github.com/asynkron/protoactor-go/actor"

// Throughput is how many messages a mailbox processes before it yields its
// worker (protoactor's default).
const Throughput = 300

type pool struct{ idle chan func() }

// Dispatcher runs each scheduled mailbox on an idle worker, or on a new
// worker when none is idle — never after another mailbox, so an actor that
// blocks holds up only itself. Workers are never stopped: there are as
// many as mailboxes ever ran at once.
var Dispatcher actor.Dispatcher = &pool{idle: make(chan func())}

func (p *pool) Schedule(fn func()) {
	select {
	case p.idle <- fn:
	default:
		go p.work(fn)
	}
}

func (p *pool) Throughput() int { return Throughput }

func (p *pool) work(fn func()) {
	for {
		fn()
		fn = <-p.idle
	}
}
