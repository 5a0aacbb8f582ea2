package actors

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/claudemesh/claudemesh-go/actors/workers"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
)

// StoreTimeout bounds how long an accept waits for the store's answer.
const StoreTimeout = 10 * time.Second

// AcceptRouter owns one child per client_message_id that has a request in
// progress. Requests for one id go to one child, which asks the store one at
// a time, so a burst of retries of one id is answered in order. A child that
// has answered everything it was given reports idle and is stopped: at rest
// the router holds no children.
type AcceptRouter struct {
	store    *actor.PID
	log      *slog.Logger
	children map[string]*acceptChildRef
}

type acceptChildRef struct {
	pid       *actor.PID
	forwarded int
}

// acceptIdle is a child telling its router it has answered `handled`
// requests and holds no more.
type acceptIdle struct {
	id      string
	child   *actor.PID
	handled int
}

// NewAcceptRouter returns the accept router's producer.
func NewAcceptRouter(store *actor.PID, log *slog.Logger) actor.Producer {
	return func() actor.Actor {
		return &AcceptRouter{store: store, log: log.With("actor", "accept"), children: make(map[string]*acceptChildRef)}
	}
}

// Receive handles one message.
func (r *AcceptRouter) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Terminated:
	case *actor.Restarting:
		r.children = make(map[string]*acceptChildRef)
	case *messages.AcceptSend:
		r.route(ctx, msg)
	case *acceptIdle:
		r.idle(ctx, msg)
	default:
		r.log.Warn("unhandled message", "type", fmt.Sprintf("%T", msg))
	}
}

func (r *AcceptRouter) route(ctx actor.Context, msg *messages.AcceptSend) {
	child, ok := r.children[msg.ClientMessageID]
	if !ok {
		store := r.store
		child = &acceptChildRef{pid: ctx.Spawn(workers.Props(func() actor.Actor {
			return &acceptChild{id: msg.ClientMessageID, store: store}
		}))}
		r.children[msg.ClientMessageID] = child
	}
	child.forwarded++
	ctx.Forward(child.pid)
}

// idle stops a child only if it has answered everything forwarded to it;
// otherwise more is already in its mailbox and it carries on.
func (r *AcceptRouter) idle(ctx actor.Context, msg *acceptIdle) {
	child, ok := r.children[msg.id]
	if !ok || !child.pid.Equal(msg.child) || child.forwarded != msg.handled {
		return
	}
	delete(r.children, msg.id)
	ctx.Stop(child.pid)
}

// acceptChild serializes the requests for one client_message_id.
type acceptChild struct {
	id      string
	store   *actor.PID
	queue   []pendingAccept
	busy    bool
	handled int
}

type pendingAccept struct {
	msg    *messages.AcceptSend
	sender *actor.PID
}

func (c *acceptChild) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *messages.AcceptSend:
		c.queue = append(c.queue, pendingAccept{msg: msg, sender: ctx.Sender()})
		if !c.busy {
			c.next(ctx)
		}
	}
}

// next asks the store about the head of the queue and, when the answer comes
// back, passes it to the original caller and moves on.
func (c *acceptChild) next(ctx actor.Context) {
	c.busy = true
	head := c.queue[0]
	future := ctx.RequestFuture(c.store, head.msg, StoreTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		reply, ok := res.(*messages.AcceptResult)
		if err != nil || !ok {
			reply = &messages.AcceptResult{Err: fmt.Errorf("%w: %v", messages.ErrStoreUnavailable, err)}
		}
		ctx.Send(head.sender, reply)
		c.queue = c.queue[1:]
		c.handled++
		c.busy = false
		if len(c.queue) > 0 {
			c.next(ctx)
			return
		}
		ctx.Send(ctx.Parent(), &acceptIdle{id: c.id, child: ctx.Self(), handled: c.handled})
	})
}
