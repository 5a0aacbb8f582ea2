package actors

import (
	"log/slog"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
)

// claims is what the lock and the reservation relays share: their
// requests in flight, the requests parked until what is in their way is
// freed (by K: a lock, a repository), and the callers' answers held until
// the store has recorded the transition they report. Q is the request, H
// what a session's connection holds and renews itself (logged when a
// renewal fails).
type claims[K comparable, Q any, H held] struct {
	log     *slog.Logger
	what    string      // "lock", "reservation": in the log
	waiting func(n int) // told how many requests are parked after each change
	calls   reqCalls[*claim[Q, H]]
	waiters parked[K, *claim[Q, H]]
	// late are the requests whose caller was told they timed out, by id,
	// until the broker answers them or the link ends: what the broker
	// grants after all is given back, for no one holds it.
	late      map[string]*claim[Q, H]
	recording map[uint64]recordedAnswer[Q, H]
	nextID    uint64 // of the last transition sent to the store
}

// held is what a connection renews: a lock, a reservation grant.
type held interface {
	comparable
	slog.LogValuer
}

// claim is one request in flight.
type claim[Q any, H held] struct {
	who      *actor.PID
	req      Q
	deadline time.Time // an acquire with a wait: until when it is tried again
	renewal  H         // set for the connection's own renewal of what it holds
}

// renewing reports whether c is the connection's own renewal, which
// answers no one.
func (c *claim[Q, H]) renewing() bool {
	var none H
	return c.renewal != none
}

// recordedAnswer is a caller's answer waiting for its transition's record.
type recordedAnswer[Q any, H held] struct {
	call  *claim[Q, H]
	reply failure
}

// failure is a relay's reply: LockReply, ReservationReply.
type failure interface{ Failure() error }

func newClaims[K comparable, Q any, H held](log *slog.Logger, what string, waiting func(n int)) claims[K, Q, H] {
	return claims[K, Q, H]{log: log, what: what, waiting: waiting, recording: map[uint64]recordedAnswer[Q, H]{},
		late: map[string]*claim[Q, H]{}}
}

// gone reports whether call's caller has gone (its reply box retired:
// timed out, or its client went away): nothing should be granted for it.
func (c *claims[K, Q, H]) gone(ctx actor.Context, call *claim[Q, H]) bool {
	if call.who == nil {
		return false
	}
	_, ok := ctx.ActorSystem().ProcessRegistry.Get(call.who)
	return !ok
}

// unpark takes the requests parked under k that still have a caller.
func (c *claims[K, Q, H]) unpark(ctx actor.Context, k K) []*claim[Q, H] {
	calls := slices.DeleteFunc(c.waiters.take(k), func(call *claim[Q, H]) bool { return c.gone(ctx, call) })
	c.waiting(c.waiters.count())
	return calls
}

// unparkOne takes call from under k unless a release already took it, or
// its caller has gone.
func (c *claims[K, Q, H]) unparkOne(ctx actor.Context, k K, call *claim[Q, H]) bool {
	took := c.waiters.remove(k, call)
	c.waiting(c.waiters.count())
	return took && !c.gone(ctx, call)
}

// answer sends call its reply; one the connection sent for itself (a
// renewal, a give-back) logs a failure instead (one for want of a link is
// not: a renewal is sent again on reconnect).
func (c *claims[K, Q, H]) answer(ctx actor.Context, call *claim[Q, H], reply failure) {
	err := reply.Failure()
	switch {
	case call.who != nil && !call.renewing():
		ctx.Send(call.who, reply)
	case err == nil || err == ErrNotConnected:
	case call.renewing():
		c.log.Warn(c.what+"_renewal_failed", c.what, call.renewal, "err", err)
	default:
		c.log.Warn(c.what+"_give_back_failed", "err", err) // it runs out with its TTL
	}
}

// park holds call under k until it is tried again, and sends retry when
// it is due: at the first of the expiries of what is in its way (RFC
// 3339), after limit, or at its deadline.
func (c *claims[K, Q, H]) park(ctx actor.Context, k K, call *claim[Q, H], limit time.Duration, retry any, expiries ...string) {
	workers.SendLater(ctx, c.waiters.park(k, call, limit, call.deadline, expiries...), retry)
	c.waiting(c.waiters.count())
}

// record numbers a transition for the store and returns its id; call,
// when set, is answered reply once the store has recorded it (recorded).
func (c *claims[K, Q, H]) record(call *claim[Q, H], reply failure) uint64 {
	c.nextID++
	if call != nil {
		c.recording[c.nextID] = recordedAnswer[Q, H]{call: call, reply: reply}
	}
	return c.nextID
}

// recorded answers the caller whose transition the store recorded (a
// record that failed is logged: the claim is the broker's all the same).
func (c *claims[K, Q, H]) recorded(ctx actor.Context, id uint64, err error) {
	if err != nil {
		c.log.Warn("record_"+c.what, "err", err)
	}
	if p, ok := c.recording[id]; ok {
		delete(c.recording, id)
		c.answer(ctx, p.call, p.reply)
	}
}

// expired answers the request of id, still in flight, the reply timeout
// makes of it, and keeps it as late (a renewal is sent again in its time).
func (c *claims[K, Q, H]) expired(ctx actor.Context, id string, timeout func(*claim[Q, H]) failure) {
	if call, ok := c.calls.take(id); ok {
		c.answer(ctx, call, timeout(call))
		if !call.renewing() && len(c.late) < maxLate {
			c.late[id] = call
		}
	}
}

// maxLate bounds the late requests a connection remembers (a broker that
// answers nothing would otherwise grow them until the link ends).
const maxLate = 1024

// takeLate removes and returns the late request of id.
func (c *claims[K, Q, H]) takeLate(id string) (*claim[Q, H], bool) {
	call, ok := c.late[id]
	delete(c.late, id)
	return call, ok
}

// takeAnswered removes and returns the request an answer names: one in
// flight, or a late one, whose answer is then applied (a release
// recorded) but sent to no one: its caller was told it timed out.
func (c *claims[K, Q, H]) takeAnswered(id string) (*claim[Q, H], bool) {
	if call, ok := c.calls.take(id); ok {
		return call, true
	}
	call, ok := c.takeLate(id)
	if ok {
		call.who = nil
	}
	return call, ok
}

// down fails every request in flight and every parked one: the link is
// gone. What the connection holds stays, to be renewed on reconnect.
func (c *claims[K, Q, H]) down(ctx actor.Context, fail func() failure) {
	for _, call := range c.calls.drain() {
		c.answer(ctx, call, fail())
	}
	for _, call := range c.waiters.drain() {
		c.answer(ctx, call, fail())
	}
	c.waiting(0)
	clear(c.late) // their answers will not come on another link
}
