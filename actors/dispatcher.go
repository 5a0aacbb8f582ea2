package actors

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/transport/ipc/metrics"
	"github.com/claudemesh/claudemesh-go/transport/wsclient"
)

// Dispatcher tunables.
const (
	// DispatchWindow is how many sends of one mesh may await their ack.
	DispatchWindow = 256
	// AckTimeout is how long a send waits for its ack before it counts as
	// a transient failure.
	AckTimeout = 15 * time.Second
	// ExpireEvery spaces the max-age sweeps: a sweep reads every pending row
	// of the mesh, so the store runs one with a claim at most this often.
	ExpireEvery = time.Minute
)

// Dispatcher drains one mesh's outbox. When its broker link comes up it
// registers with the store (DispatchReady, a credit of DispatchWindow); the
// store then claims due rows for it (pending → inflight, attempts+1) at the
// end of the batch that made them due — the accept's own transaction, or
// the one applying the outcomes that returned credit — and sends them over.
// The dispatcher pipelines them, correlating acks by client_message_id,
// and reports each answer to the store (spec §4.6), which returns the slot's
// credit. Nothing polls: a timer set to the next due row (a retry's backoff)
// wakes the store. A dropped connection returns the mesh's inflight rows to
// pending and ends the registration.
//
// Claimed rows wait in held, oldest first, until the pacer lets them go
// (dispatch_pace.go): a rate-limit refusal pauses the whole link and puts
// the refused row back in held, in its place, without telling the store;
// `no connected peer` backs off that destination alone. On a link that
// negotiated nothing the pacer lets one send out at a time (linkUp's
// serial): such a broker may reorder sends in flight together.
type Dispatcher struct {
	mesh       string
	store      *actor.PID
	metrics    *metrics.Daemon
	link       *wsclient.Conn // nil while the link is down
	firstSend  bool           // the link's broker takes first_send
	log        *slog.Logger
	gen        uint64 // this link's registration; 0 while down
	inflight   map[string]*flight
	timer      *time.Timer
	wakeAt     time.Time
	ackTimeout time.Duration
	// sent are the flights in the order they went out, which is the order
	// their ack deadlines come due (one timeout for all): one timer, armed
	// for the oldest, stands for them all. An answered flight leaves the
	// queue when it reaches the front.
	sent     []*flight
	ackTimer *time.Timer
	ackArmed bool

	pacer     *wsclient.Pacer
	held      []*flight // claimed, not sent yet: by seq
	seq       uint64    // numbers claimed rows in claim order
	paceTimer *time.Timer
	paceAt    time.Time
	dests     map[string]*destWait // destinations refused with `no connected peer`
	board     *paceBoard
}

// dispatchGen numbers registrations across the process, so that outcomes
// of a link before a restart never return credit to the next.
var dispatchGen atomic.Uint64

type flight struct {
	row   messages.ClaimedRow
	seq   uint64
	sent  time.Time
	done  bool   // answered: the deadline queue drops it when it reaches the front
	probe string // the destination this send probes after its `no connected peer` backoff
}

type (
	dueTimer    struct{}
	ackDeadline struct{}
	paceWake    struct{}
)

func newDispatcher(cfg MeshConfig, store *actor.PID, m *metrics.Daemon, log *slog.Logger) actor.Producer {
	ackTimeout := cfg.AckTimeout
	if ackTimeout <= 0 {
		ackTimeout = AckTimeout
	}
	return func() actor.Actor {
		return &Dispatcher{mesh: cfg.Slug, store: store, metrics: m, log: log.With("actor", "dispatcher"),
			inflight: map[string]*flight{}, ackTimeout: ackTimeout, pacer: wsclient.NewPacer(DispatchWindow, rand.Float64),
			dests: map[string]*destWait{}, board: cfg.pace}
	}
}

func (d *Dispatcher) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started, *actor.Stopped, *actor.Restarting:
	case *actor.Stopping:
		d.stopTimers()
	case *linkUp:
		d.link, d.gen, d.firstSend = m.conn, dispatchGen.Add(1), m.firstSend
		d.pacer.LinkUp(m.serial)
		ctx.Request(d.store, &messages.DispatchReady{Mesh: d.mesh, Gen: d.gen, Window: DispatchWindow,
			MaxAge: m.maxAge.Milliseconds(), Now: time.Now().UnixMilli()})
	case *linkDown:
		d.linkDown(ctx)
	case *messages.ClaimedRows:
		d.claimed(ctx, m)
	case *dueTimer:
		if d.link != nil {
			ctx.Send(d.store, &messages.DispatchWake{Mesh: d.mesh})
		}
	case *messages.AckFrame:
		d.ack(ctx, m)
	case *ackDeadline:
		d.ackArmed = false
		d.expire(ctx)
	case *paceWake:
		d.paceAt = time.Time{}
		d.pump(ctx)
	case *messages.OutcomeApplied: // DispatchReady's and ReleaseMesh's
		if m.Err != nil {
			d.log.Error("register with the store", "err", m.Err)
		}
	default:
		d.log.Warn("unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

// claimed transmits the rows the store claimed for this link. Rows of a
// link that is gone are left alone: the ReleaseMesh sent when it went down
// reaches the store after their claim and returns them to pending.
func (d *Dispatcher) claimed(ctx actor.Context, r *messages.ClaimedRows) {
	if r.Gen != d.gen || d.link == nil {
		return
	}
	if r.Expired > 0 {
		d.log.Warn("outbox_rows_expired", "rows", r.Expired)
	}
	for _, row := range r.Rows {
		d.seq++
		d.held = append(d.held, &flight{row: row, seq: d.seq})
	}
	if r.HasNext {
		d.schedule(ctx, time.UnixMilli(r.NextDue))
	}
	d.pump(ctx)
}

// transmit sends a held row (removed from held by the caller).
func (d *Dispatcher) transmit(ctx actor.Context, f *flight, now time.Time) {
	f.sent, f.done = now, false
	d.inflight[f.row.ClientMessageID] = f
	d.sent = append(d.sent, f)
	d.armAckTimer(ctx)
	d.pacer.Sent(now)
	payload := f.row.Payload
	if d.firstSend && f.row.Attempts == 1 {
		payload = messages.WithFirstSend(payload) // never sent before: the broker may skip its dedupe read
	}
	if err := d.link.Send(json.RawMessage(payload)); err != nil {
		d.finish(ctx, f, &messages.SendOutcome{Outcome: messages.OutcomeRetry, Reason: err.Error()}, time.Time{})
	}
}

// armAckTimer arms the ack timer for the oldest flight, unless it is armed.
func (d *Dispatcher) armAckTimer(ctx actor.Context) {
	if d.ackArmed || len(d.sent) == 0 {
		return
	}
	d.ackArmed = true
	wait := max(time.Until(d.sent[0].sent.Add(d.ackTimeout)), 0)
	if d.ackTimer == nil {
		d.ackTimer = workers.SendLater(ctx, wait, &ackDeadline{})
		return
	}
	d.ackTimer.Reset(wait)
}

// expire fails the flights whose ack is overdue (ack_timeout, a transient
// failure) and arms the timer for the next deadline. The front of the queue
// is never an answered flight: finish pops those.
func (d *Dispatcher) expire(ctx actor.Context) {
	now := time.Now()
	for len(d.sent) > 0 && now.Sub(d.sent[0].sent) >= d.ackTimeout {
		d.finish(ctx, d.sent[0], &messages.SendOutcome{Outcome: messages.OutcomeRetry, Reason: "ack_timeout"}, time.Time{})
	}
	d.armAckTimer(ctx)
	d.pump(ctx)
}

// schedule arms the due timer for at, unless it already fires earlier.
func (d *Dispatcher) schedule(ctx actor.Context, at time.Time) {
	if d.timer != nil && !d.wakeAt.After(at) && d.wakeAt.After(time.Now()) {
		return
	}
	if d.timer != nil {
		d.timer.Stop()
	}
	d.wakeAt = at
	d.timer = workers.SendLater(ctx, max(time.Until(at), 0), &dueTimer{})
}

func (d *Dispatcher) ack(ctx actor.Context, a *messages.AckFrame) {
	id := a.ClientMessageID
	if id == "" {
		id = a.ID
	}
	f, ok := d.inflight[id]
	if !ok {
		return // late: the row was already decided
	}
	out, retryAfter, refusal := classify(a)
	now := time.Now()
	switch {
	case refusal == refusedRateLimit:
		d.rateLimited(ctx, f, retryAfter, now)
	case refusal == refusedNoPeer:
		d.finish(ctx, f, out, d.destRefused(f, now))
	default:
		if out.Outcome == messages.OutcomeDone {
			d.pacer.Accepted()
			d.destAccepted(f)
		}
		d.finish(ctx, f, out, time.Time{})
	}
	d.publish(now)
	d.pump(ctx)
}

// settle takes an answered (or failed) send out of flight.
func (d *Dispatcher) settle(f *flight) {
	f.done = true
	delete(d.inflight, f.row.ClientMessageID)
	for len(d.sent) > 0 && d.sent[0].done { // acks mostly come in order: the queue stays the window's size
		d.sent[0] = nil
		d.sent = d.sent[1:]
	}
	if f.probe != "" {
		d.probeEnded(f)
	}
}

// finish applies one attempt's outcome to its row and frees its slot; a
// retry is due after the row's backoff, or at next when given (a
// destination's backoff, which its rows share so that they keep their
// order).
func (d *Dispatcher) finish(ctx actor.Context, f *flight, out *messages.SendOutcome, next time.Time) {
	d.settle(f)
	now := time.Now()
	d.metrics.Dispatch.WithLabelValues(d.mesh, out.Outcome).Observe(now.Sub(f.sent).Seconds())
	out.Mesh, out.Gen, out.RowID, out.Now = d.mesh, d.gen, f.row.ID, now.UnixMilli()
	if out.Outcome == messages.OutcomeRetry {
		if next.IsZero() {
			next = now.Add(persistence.Backoff(f.row.Attempts, rand.Float64))
		}
		out.Next = next.UnixMilli()
		d.schedule(ctx, next)
	}
	if out.Outcome == messages.OutcomeDead {
		d.log.Warn("outbox_row_dead", "client_message_id", f.row.ClientMessageID, "reason", out.Reason)
	}
	ctx.Send(d.store, out) // no reply: the store logs a failure to apply it
}

// Refusals the dispatcher answers by waiting rather than per row.
const (
	notRefused       = iota
	refusedRateLimit // the link pauses (the pacer)
	refusedNoPeer    // the destination backs off (destWait)
)

// classify maps a broker ack to an outbox outcome (spec §4.6), for our
// broker's extended ack and the upstream broker's plain one, with the
// broker's retry-after and the refusal it is, if one the dispatcher waits
// out (notRefused, refusedRateLimit, refusedNoPeer).
func classify(a *messages.AckFrame) (*messages.SendOutcome, time.Duration, int) {
	done := func(bmid string) *messages.SendOutcome {
		return &messages.SendOutcome{Outcome: messages.OutcomeDone, BrokerMessageID: bmid, HistoryID: a.HistoryID}
	}
	retry := func() *messages.SendOutcome {
		return &messages.SendOutcome{Outcome: messages.OutcomeRetry, Reason: a.Error}
	}
	dead := func(reason string) *messages.SendOutcome {
		return &messages.SendOutcome{Outcome: messages.OutcomeDead, Reason: reason}
	}
	switch {
	case a.Code == 201 || a.Code == 200:
		return done(cmp.Or(a.BrokerMessageID, a.MessageID)), 0, notRefused
	case a.Code == 409:
		return dead("idempotency_key_reused: " + a.Conflict), 0, notRefused
	case a.Code == 429:
		var after time.Duration
		if a.RetryAfterMs != nil {
			after = time.Duration(max(*a.RetryAfterMs, 0)) * time.Millisecond
		}
		return retry(), after, refusedRateLimit
	case a.Code >= 500:
		return retry(), 0, notRefused
	case a.Code >= 400:
		return dead(a.Error), 0, notRefused
	case a.Queued && a.Error == "": // the upstream broker's success
		return done(a.MessageID), 0, notRefused
	case strings.HasPrefix(a.Error, "rate_limit"):
		return retry(), 0, refusedRateLimit
	case strings.HasPrefix(a.Error, "no connected peer"):
		return retry(), 0, refusedNoPeer
	}
	return dead(a.Error), 0, notRefused
}

func (d *Dispatcher) linkDown(ctx actor.Context) {
	if d.link == nil {
		return
	}
	d.link, d.gen = nil, 0
	clear(d.inflight)
	clear(d.sent)
	d.sent = d.sent[:0]
	clear(d.held)
	d.held = d.held[:0]
	for _, w := range d.dests {
		w.probing = false
	}
	ctx.Request(d.store, &messages.ReleaseMesh{Mesh: d.mesh, Now: time.Now().UnixMilli()})
}

func (d *Dispatcher) stopTimers() {
	if d.timer != nil {
		d.timer.Stop()
	}
	if d.ackTimer != nil {
		d.ackTimer.Stop()
	}
	if d.paceTimer != nil {
		d.paceTimer.Stop()
	}
}
