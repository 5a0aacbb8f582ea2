package actors

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/wsclient"
)

// pump sends held rows, oldest first, while the pacer lets it (the window
// has room, the link is not paused, the pace's gap has passed); a row
// whose destination backs off stays held or goes back to the store
// (destGate). When the pacer says wait, a timer wakes the pump.
func (d *Dispatcher) pump(ctx actor.Context) {
	if d.link == nil {
		return
	}
	now := time.Now()
	for i := 0; i < len(d.held); {
		ready, wait := d.pacer.Wait(now, len(d.inflight))
		if !ready {
			if wait > 0 {
				d.paceWakeAt(ctx, now.Add(wait))
			}
			return
		}
		f := d.held[i]
		gate, until := d.destGate(f, now)
		if gate == destHold {
			i++
			continue
		}
		d.held = slices.Delete(d.held, i, i+1)
		if gate == destDefer {
			d.report(ctx, f, &messages.SendOutcome{Outcome: messages.OutcomeRetry, Reason: "no connected peer: waiting for the destination"}, until)
			continue
		}
		d.transmit(ctx, f, now)
	}
}

// paceWakeAt arms the pace timer for at, unless it fires earlier already.
func (d *Dispatcher) paceWakeAt(ctx actor.Context, at time.Time) {
	if !d.paceAt.IsZero() && !d.paceAt.After(at) {
		return
	}
	if d.paceTimer != nil {
		d.paceTimer.Stop()
	}
	d.paceAt = at
	d.paceTimer = workers.SendLater(ctx, max(time.Until(at), 0), &paceWake{})
}

// rateLimited handles a rate-limit refusal: the pacer pauses the link
// (when the refusal is news), and the row goes back in held, in its place
// by claim order, still claimed: the store hears nothing of it, so a
// paused backlog costs no writes and keeps its order.
func (d *Dispatcher) rateLimited(ctx actor.Context, f *flight, retryAfter time.Duration, now time.Time) {
	d.settle(f)
	d.metrics.Refused.WithLabelValues(d.mesh, "rate_limit").Inc()
	if d.pacer.Refused(now, f.sent, retryAfter) {
		s := d.pacer.State(now)
		d.log.Info("send_paused", "until", s.PausedUntil.Format(time.RFC3339Nano), "pace", s.Gap.String(),
			"retry_after", retryAfter.String())
	}
	at, _ := slices.BinarySearchFunc(d.held, f.seq, func(h *flight, seq uint64) int {
		return cmp.Compare(h.seq, seq)
	})
	d.held = slices.Insert(d.held, at, f)
}

// report sends a row's outcome to the store without it having been sent
// (a held row given back), waking the dispatcher when it is due again.
func (d *Dispatcher) report(ctx actor.Context, f *flight, out *messages.SendOutcome, next time.Time) {
	now := time.Now()
	out.Mesh, out.Gen, out.RowID, out.Now, out.Next = d.mesh, d.gen, f.row.ID, now.UnixMilli(), next.UnixMilli()
	d.schedule(ctx, next)
	ctx.Send(d.store, out)
}

// publish writes the pacing state where GET /v1/health reads it.
func (d *Dispatcher) publish(now time.Time) {
	if d.board == nil {
		return
	}
	d.board.set(d.pacer.State(now), len(d.dests))
}

// paceBoard is a mesh's pacing state as its dispatcher last published it,
// read by the broker connection's status (GET /v1/health) without asking
// the dispatcher. One per mesh subtree.
type paceBoard struct {
	mu    sync.Mutex
	state wsclient.PaceState
	dests int
}

func (b *paceBoard) set(s wsclient.PaceState, dests int) {
	b.mu.Lock()
	b.state, b.dests = s, dests
	b.mu.Unlock()
}

// get reports the state at now (a pause that has passed is none).
func (b *paceBoard) get(now time.Time) messages.SendPace {
	if b == nil {
		return messages.SendPace{}
	}
	b.mu.Lock()
	s, dests := b.state, b.dests
	b.mu.Unlock()
	p := messages.SendPace{PaceMs: s.Gap.Milliseconds(), Window: s.Window, RateLimited: s.Refusals, DestinationBackoffs: dests}
	if now.Before(s.PausedUntil) {
		p.PausedUntil = s.PausedUntil.UTC().Format(time.RFC3339Nano)
	}
	return p
}
