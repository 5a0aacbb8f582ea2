package actors

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
)

// Accept timings.
const (
	// StoreTimeout bounds how long an accept waits for the store's answer.
	StoreTimeout = 10 * time.Second
	// AcceptIdle is how long an accept child waits for a new id before it
	// is stopped: under load children are reused, at rest none is left.
	AcceptIdle = 30 * time.Second
	// maxIdleChildren bounds the children kept for reuse.
	maxIdleChildren = 256
)

// AcceptRouter owns one child per client_message_id that has a request in
// progress — per sender's id, (mesh, client_message_id), as the outbox
// keys it. Requests for one id go to one child, which asks the store one at
// a time, so a burst of retries of one id is answered in order; another
// sender's use of the same id is another id, served by another child. A child that
// has answered everything it was given reports idle; it then waits, for up
// to AcceptIdle, to be given the next new id instead of a child being
// spawned for it. Under load a handful of children serve every id; at rest
// the router holds none.
type AcceptRouter struct {
	store    *actor.PID
	log      *slog.Logger
	timings  acceptTimings
	children map[acceptKey]*acceptChildRef // by the id each serves
	idle     []idleChild                   // oldest first
	sweeping bool                          // a sweep of idle children is due
}

// acceptKey is the id a child serves: a client_message_id of one sender
// (a membership's slug or a session's route).
type acceptKey struct {
	mesh, id string
}

func keyOf(m *messages.AcceptSend) acceptKey { return acceptKey{mesh: m.Mesh, id: m.ClientMessageID} }

type acceptChildRef struct {
	pid       *actor.PID
	forwarded int // requests forwarded to it in all
}

// idleChild is a child waiting for its next id since since.
type idleChild struct {
	ref   *acceptChildRef
	since time.Time
}

// acceptIdle is a child telling its router it has answered `handled`
// requests in all and holds no more.
type acceptIdle struct {
	child   *actor.PID
	id      acceptKey
	handled int
}

// acceptStuck is a child telling its router the store did not answer it
// in time: it is retired, and bounces to the router every request it holds
// or still gets, for another child. (Its late answer, if one comes, must
// not be taken for the answer to a later request.)
type acceptStuck struct {
	child *actor.PID
	id    acceptKey
}

// sweepIdle is the router's timer: stop the children idle for long.
type sweepIdle struct{}

// acceptTimings are the accept actors' timeouts (the tests shorten them).
type acceptTimings struct {
	idle  time.Duration // AcceptIdle
	store time.Duration // StoreTimeout
}

// defaultAcceptTimings are the accept actors' timeouts in a daemon.
var defaultAcceptTimings = acceptTimings{idle: AcceptIdle, store: StoreTimeout}

// newAcceptRouter returns the accept router's producer.
func newAcceptRouter(store *actor.PID, log *slog.Logger, timings acceptTimings) actor.Producer {
	return func() actor.Actor {
		return &AcceptRouter{store: store, log: log.With("actor", "accept"), timings: timings,
			children: make(map[acceptKey]*acceptChildRef)}
	}
}

// Receive handles one message.
func (r *AcceptRouter) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Terminated:
	case *actor.Restarting:
		r.children, r.idle = make(map[acceptKey]*acceptChildRef), nil
	case *messages.AcceptSend:
		r.route(ctx, msg)
	case *acceptIdle:
		r.childIdle(ctx, msg)
	case *acceptStuck:
		if child, ok := r.children[msg.id]; ok && child.pid.Equal(msg.child) {
			delete(r.children, msg.id)
		}
		ctx.Poison(msg.child) // after the requests it was given: it bounces them
	case *sweepIdle:
		r.sweep(ctx)
	default:
		r.log.Warn("unhandled message", "type", fmt.Sprintf("%T", msg))
	}
}

// route forwards an accept to the child of its id: the one already serving
// it, else an idle child, else a new one.
func (r *AcceptRouter) route(ctx actor.Context, msg *messages.AcceptSend) {
	key := keyOf(msg)
	child, ok := r.children[key]
	if !ok {
		if n := len(r.idle); n > 0 {
			child = r.idle[n-1].ref // the most recently used: its stack and caches are warm
			r.idle[n-1] = idleChild{}
			r.idle = r.idle[:n-1]
		} else {
			store, timeout := r.store, r.timings.store
			child = &acceptChildRef{pid: ctx.Spawn(workers.InlineProps(func() actor.Actor {
				return &acceptChild{store: store, timeout: timeout}
			}))}
		}
		r.children[key] = child
	}
	child.forwarded++
	ctx.Forward(child.pid)
}

// childIdle frees a child's id only if the child has answered everything
// forwarded to it; otherwise more is already in its mailbox and it carries
// on. A freed child waits for its next id.
func (r *AcceptRouter) childIdle(ctx actor.Context, msg *acceptIdle) {
	child, ok := r.children[msg.id]
	if !ok || !child.pid.Equal(msg.child) || child.forwarded != msg.handled {
		return
	}
	delete(r.children, msg.id)
	if len(r.idle) >= maxIdleChildren {
		ctx.Stop(child.pid)
		return
	}
	r.idle = append(r.idle, idleChild{ref: child, since: time.Now()})
	if !r.sweeping {
		r.sweeping = true
		workers.SendLater(ctx, r.timings.idle, &sweepIdle{})
	}
}

// sweep stops the children idle for AcceptIdle (timings.idle) or longer,
// and comes back for the others.
func (r *AcceptRouter) sweep(ctx actor.Context) {
	r.sweeping = false
	cut := time.Now().Add(-r.timings.idle)
	n := 0
	for n < len(r.idle) && !r.idle[n].since.After(cut) {
		ctx.Stop(r.idle[n].ref.pid)
		n++
	}
	r.idle = append(r.idle[:0], r.idle[n:]...)
	if len(r.idle) > 0 {
		r.sweeping = true
		workers.SendLater(ctx, time.Until(r.idle[0].since.Add(r.timings.idle))+time.Millisecond, &sweepIdle{})
	}
}

// acceptChild serializes the requests for the sender's client_message_id it
// serves (a child serves one id at a time, and is given the next once idle).
type acceptChild struct {
	store   *actor.PID
	timeout time.Duration // StoreTimeout
	queue   []pendingAccept
	busy    bool
	retired bool // the store did not answer in time (acceptStuck)
	handled int
	// asked is when the store request in progress went out; timer, made
	// once and reset for each request, checks it against timeout (a fire
	// meant for an earlier request finds a later asked and waits on).
	asked time.Time
	timer *time.Timer
}

type pendingAccept struct {
	msg    *messages.AcceptSend
	sender *actor.PID
}

// storeTimedOut is a child's timer: the store may be late.
type storeTimedOut struct{}

func (c *acceptChild) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *messages.AcceptSend:
		if c.retired {
			ctx.Forward(ctx.Parent())
			return
		}
		c.queue = append(c.queue, pendingAccept{msg: msg, sender: ctx.Sender()})
		if !c.busy {
			c.next(ctx)
		}
	case *messages.AcceptResult:
		if !c.retired {
			c.answered(ctx, msg)
		}
	case *storeTimedOut:
		if !c.busy || c.retired {
			return
		}
		if wait := c.timeout - time.Since(c.asked); wait > 0 {
			c.timer.Reset(wait)
			return
		}
		c.stuck(ctx)
	case *actor.Stopping:
		if c.timer != nil {
			c.timer.Stop()
		}
	}
}

// next asks the store about the head of the queue, with StoreTimeout for
// the answer.
func (c *acceptChild) next(ctx actor.Context) {
	c.busy = true
	c.asked = time.Now()
	if c.timer == nil {
		c.timer = workers.SendLater(ctx, c.timeout, &storeTimedOut{})
	} else {
		c.timer.Reset(c.timeout)
	}
	ctx.Request(c.store, c.queue[0].msg)
}

// stuck answers the head of the queue 503 (the store did not answer in
// time: retry with the same id) and retires the child: the router gives
// the id to another child, and the requests queued here go back to it.
func (c *acceptChild) stuck(ctx actor.Context) {
	c.retired = true
	head := c.queue[0]
	ctx.Send(head.sender, &messages.AcceptResult{Err: fmt.Errorf("%w: %v", messages.ErrStoreUnavailable, actor.ErrTimeout)})
	ctx.Send(ctx.Parent(), &acceptStuck{child: ctx.Self(), id: keyOf(head.msg)})
	for _, p := range c.queue[1:] {
		ctx.RequestWithCustomSender(ctx.Parent(), p.msg, p.sender)
	}
	c.queue = nil
}

// answered passes the store's answer for the head of the queue to its
// caller and moves on; an empty queue is reported to the router.
func (c *acceptChild) answered(ctx actor.Context, reply *messages.AcceptResult) {
	if !c.busy {
		return
	}
	c.timer.Stop()
	head := c.queue[0]
	ctx.Send(head.sender, reply)
	c.queue[0] = pendingAccept{}
	c.queue = c.queue[1:]
	c.handled++
	c.busy = false
	if len(c.queue) > 0 {
		c.next(ctx)
		return
	}
	c.queue = nil // a slice of the drained array would keep it alive
	ctx.Send(ctx.Parent(), &acceptIdle{child: ctx.Self(), id: keyOf(head.msg), handled: c.handled})
}
