package ipcserver

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// The handlers ask the actors through reply boxes rather than futures: a
// future is a new process per request (registered, timed, unregistered),
// a box is registered once and used by one request at a time. A handler
// takes a box, sends its message with the box as the sender, waits on the
// box with its deadline and gives it back. A box whose request timed out
// is never used again, so a late answer cannot be taken for another
// request's.

// replyBox is a process that passes the first message sent to it to the
// handler waiting on it.
type replyBox struct {
	pid   *actor.PID
	ch    chan any
	timer *time.Timer
}

// SendUserMessage hands msg to the waiting handler; a second answer to
// one request (none is sent) would be dropped.
func (b *replyBox) SendUserMessage(_ *actor.PID, msg any) {
	if env, ok := msg.(*actor.MessageEnvelope); ok {
		msg = env.Message
	}
	select {
	case b.ch <- msg:
	default:
	}
}

// SendSystemMessage: a box watches nothing and is watched by nobody.
func (b *replyBox) SendSystemMessage(*actor.PID, any) {}

// Stop: a box is retired by its pool (replies.drop).
func (b *replyBox) Stop(*actor.PID) {}

// replies are the server's reply boxes: as many idle as requests may run
// at once, plus event streams' subscriptions.
type replies struct {
	system *actor.ActorSystem
	idle   chan *replyBox
}

func newReplies(system *actor.ActorSystem, size int) *replies {
	return &replies{system: system, idle: make(chan *replyBox, size)}
}

// get is an idle box, or a new one.
func (r *replies) get() *replyBox {
	select {
	case b := <-r.idle:
		return b
	default:
	}
	b := &replyBox{ch: make(chan any, 1), timer: time.NewTimer(time.Hour)}
	b.timer.Stop()
	b.pid, _ = r.system.ProcessRegistry.Add(b, "ipc-reply"+r.system.ProcessRegistry.NextId())
	return b
}

// ask sends msg to pid with b as its sender and waits up to timeout for
// the answer; ok is false when none came in time, or done closed first
// (the caller went away: nil for none), and b is then dropped — an actor
// that answers later finds its asker unregistered.
func (r *replies) ask(pid *actor.PID, msg any, timeout time.Duration, done <-chan struct{}) (answer any, ok bool) {
	b := r.get()
	r.system.Root.RequestWithCustomSender(pid, msg, b.pid)
	b.timer.Reset(timeout)
	select {
	case answer = <-b.ch:
		b.timer.Stop()
		r.put(b)
		return answer, true
	case <-b.timer.C:
		r.system.ProcessRegistry.Remove(b.pid)
		return nil, false
	case <-done:
		b.timer.Stop()
		r.system.ProcessRegistry.Remove(b.pid)
		return nil, false
	}
}

// put returns an answered box to the idle ones, or retires it when enough
// are idle.
func (r *replies) put(b *replyBox) {
	select {
	case r.idle <- b:
	default:
		r.system.ProcessRegistry.Remove(b.pid)
	}
}
