package broker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// DefaultRelayPoll is how often a replica on PostgreSQL looks for
// deliveries that nobody claimed within it: a notification the replica
// missed is made up for within twice this.
const DefaultRelayPoll = 2 * time.Second

// relayOverlap widens each look back over the previous one's end: a row
// stamped before that end but committed after it (an accept whose
// transaction took long, a replica whose clock is behind) is still found.
// Draining a connection twice changes nothing.
const relayOverlap = 10 * time.Second

// relay is the fallback of cross-replica delivery on PostgreSQL. Every
// poll interval it asks the store which recipients have deliveries that
// became claimable between its last look and an interval ago and are
// unclaimed still — a notification this replica missed (its LISTEN
// connection lost, or dead without a word until its probe), or a
// recipient connected nowhere — and has the hub drain the connections here
// that would take them. It is one indexed query a poll, however many
// connections the replica holds.
type relay struct {
	store   *broker.Store
	metrics *metrics
	hub     *actor.PID
	log     *slog.Logger
	now     func() time.Time
	every   time.Duration
	until   time.Time // the end of the last look
	timer   *time.Timer
	// missing is set while looks find connections to drain: one loss,
	// logged once.
	missing bool
}

// relayTick starts a look.
type relayTick struct{}

func newRelay(store *broker.Store, m *metrics, hub *actor.PID, log *slog.Logger, now func() time.Time,
	every time.Duration) actor.Producer {
	return func() actor.Actor {
		return &relay{store: store, metrics: m, hub: hub, log: log.With("actor", "relay"), now: now, every: every}
	}
}

func (r *relay) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.until = r.now().Add(-r.every) // earlier rows go out at their recipients' hellos
		r.schedule(ctx)
	case *actor.Stopping:
		if r.timer != nil {
			r.timer.Stop()
		}
	case *actor.Stopped, *actor.Restarting:
	case *relayTick:
		r.look(ctx)
	case *hubDrained:
		r.drained(m.conns)
	default:
		r.log.Warn("unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

func (r *relay) schedule(ctx actor.Context) {
	r.timer = workers.SendLater(ctx, r.every, &relayTick{})
}

// look asks for the recipients waiting since the last look and has the
// hub drain those connected here; a failed look is covered by the next.
func (r *relay) look(ctx actor.Context) {
	defer r.schedule(ctx)
	until := r.now().Add(-r.every)
	waiting, err := r.store.WaitingRecipients(context.Background(), r.until.Add(-relayOverlap), until)
	if err != nil {
		r.log.Warn("relay_poll_failed", "err", err)
		return
	}
	r.until = until
	if len(waiting) == 0 {
		r.drained(0)
		return
	}
	ctx.Request(r.hub, &hubFallback{waiting: waiting})
}

// drained counts the connections a look had drained, and logs the first
// look of a run that had any.
func (r *relay) drained(conns int) {
	if conns == 0 {
		r.missing = false
		return
	}
	r.metrics.relayDrains.Add(float64(conns))
	if !r.missing {
		r.log.Warn("relay_fallback_drain", "connections", conns, "poll", r.every,
			"detail", "deliveries waited unclaimed longer than the relay poll: this replica missed their notification")
	}
	r.missing = true
}
