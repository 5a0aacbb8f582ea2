package actors

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// Dispatcher tunables.
const (
	// DispatchWindow is how many sends of one mesh may await their ack.
	DispatchWindow = 256
	// AckTimeout is how long a send waits for its ack before it counts as
	// a transient failure.
	AckTimeout = 15 * time.Second
	// ExpireEvery spaces the max-age sweeps: a sweep reads every pending row
	// of the mesh, so it rides along with a claim at most this often.
	ExpireEvery = time.Minute
)

// Dispatcher drains one mesh's outbox: woken by each accept and by a timer
// set to the next due row (no polling), it claims due rows (pending →
// inflight, attempts+1) and pipelines them, up to DispatchWindow in flight,
// correlating acks by client_message_id; each answer is applied to its row
// (spec §4.6). A dropped connection returns the mesh's inflight rows to
// pending.
type Dispatcher struct {
	mesh     string
	store    *actor.PID
	conn     *actor.PID
	log      *slog.Logger
	maxAge   time.Duration
	inflight map[string]*flight
	claiming bool
	expired  time.Time // last max-age sweep
	timer    *time.Timer
	wakeAt   time.Time
}

type flight struct {
	row   messages.ClaimedRow
	timer *time.Timer
}

type (
	dueTimer   struct{}
	ackTimeout struct{ clientMessageID, rowID string }
)

func newDispatcher(mesh string, store *actor.PID, log *slog.Logger) actor.Producer {
	return func() actor.Actor {
		return &Dispatcher{mesh: mesh, store: store, log: log.With("actor", "dispatcher"), inflight: map[string]*flight{}}
	}
}

func (d *Dispatcher) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started, *actor.Stopped, *actor.Restarting:
	case *actor.Stopping:
		d.stopTimers()
	case *linkUp:
		d.conn, d.maxAge = ctx.Sender(), m.maxAge
		d.claim(ctx)
	case *linkDown:
		d.linkDown(ctx)
	case *messages.DispatchWake, *dueTimer:
		d.claim(ctx)
	case *messages.AckFrame:
		d.ack(ctx, m)
	case *ackTimeout:
		if f, ok := d.inflight[m.clientMessageID]; ok && f.row.ID == m.rowID {
			d.finish(ctx, f, &messages.SendOutcome{Outcome: messages.OutcomeRetry, Reason: "ack_timeout"}, 0)
		}
	case *transmitted:
		if f, ok := d.inflight[m.id]; ok && m.err != nil {
			d.finish(ctx, f, &messages.SendOutcome{Outcome: messages.OutcomeRetry, Reason: m.err.Error()}, 0)
		}
	case *messages.OutcomeApplied:
		if m.Err != nil {
			d.log.Error("apply send outcome", "err", m.Err)
		}
	default:
		d.log.Warn("unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

// claim asks the store for due rows while the link is up and the window
// has room; one claim is under way at a time.
func (d *Dispatcher) claim(ctx actor.Context) {
	room := DispatchWindow - len(d.inflight)
	if d.conn == nil || d.claiming || room <= 0 {
		return
	}
	d.claiming = true
	now := time.Now()
	cmd := &messages.ClaimDue{Mesh: d.mesh, Now: now.UnixMilli(), Limit: room}
	if d.maxAge > 0 && now.Sub(d.expired) >= ExpireEvery {
		cmd.ExpireBefore, d.expired = now.Add(-d.maxAge).UnixMilli(), now
	}
	future := ctx.RequestFuture(d.store, cmd, StoreTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		d.claiming = false
		r, ok := res.(*messages.ClaimedRows)
		if err != nil || !ok || r.Err != nil {
			d.log.Error("claim due rows", "err", err, "reply", fmt.Sprintf("%T", res))
			d.schedule(ctx, time.Now().Add(time.Second))
			return
		}
		if r.Expired > 0 {
			d.log.Warn("outbox_rows_expired", "rows", r.Expired, "max_age", d.maxAge)
		}
		for _, row := range r.Rows {
			d.transmit(ctx, row)
		}
		if len(r.Rows) == room && len(r.Rows) > 0 {
			ctx.Send(ctx.Self(), &messages.DispatchWake{})
		}
		if r.HasNext {
			d.schedule(ctx, time.UnixMilli(r.NextDue))
		}
	})
}

func (d *Dispatcher) transmit(ctx actor.Context, row messages.ClaimedRow) {
	root, self := ctx.ActorSystem().Root, ctx.Self()
	f := &flight{row: row}
	f.timer = time.AfterFunc(AckTimeout, func() { root.Send(self, &ackTimeout{clientMessageID: row.ClientMessageID, rowID: row.ID}) })
	d.inflight[row.ClientMessageID] = f
	if d.conn == nil {
		d.finish(ctx, f, &messages.SendOutcome{Outcome: messages.OutcomeRetry, Reason: "broker_disconnected"}, 0)
		return
	}
	ctx.Request(d.conn, &transmit{id: row.ClientMessageID, frame: json.RawMessage(row.Payload)})
}

// schedule arms the due timer for at, unless it already fires earlier.
func (d *Dispatcher) schedule(ctx actor.Context, at time.Time) {
	if d.timer != nil && !d.wakeAt.After(at) && d.wakeAt.After(time.Now()) {
		return
	}
	if d.timer != nil {
		d.timer.Stop()
	}
	root, self := ctx.ActorSystem().Root, ctx.Self()
	d.wakeAt = at
	d.timer = time.AfterFunc(max(time.Until(at), 0), func() { root.Send(self, &dueTimer{}) })
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
	out, retryAfter := classify(a)
	d.finish(ctx, f, out, retryAfter)
}

// finish applies one attempt's outcome to its row and frees its slot.
func (d *Dispatcher) finish(ctx actor.Context, f *flight, out *messages.SendOutcome, retryAfter time.Duration) {
	f.timer.Stop()
	delete(d.inflight, f.row.ClientMessageID)
	now := time.Now()
	out.RowID, out.Now = f.row.ID, now.UnixMilli()
	if out.Outcome == messages.OutcomeRetry {
		wait := max(persistence.Backoff(f.row.Attempts, rand.Float64), retryAfter)
		out.Next = now.Add(wait).UnixMilli()
		d.schedule(ctx, now.Add(wait))
	}
	if out.Outcome == messages.OutcomeDead {
		d.log.Warn("outbox_row_dead", "client_message_id", f.row.ClientMessageID, "reason", out.Reason)
	}
	ctx.Request(d.store, out)
	d.claim(ctx)
}

// classify maps a broker ack to an outbox outcome (spec §4.6), for our
// broker's extended ack and the upstream broker's plain one.
func classify(a *messages.AckFrame) (*messages.SendOutcome, time.Duration) {
	done := func(bmid string) *messages.SendOutcome {
		return &messages.SendOutcome{Outcome: messages.OutcomeDone, BrokerMessageID: bmid, HistoryID: a.HistoryID}
	}
	retry := &messages.SendOutcome{Outcome: messages.OutcomeRetry, Reason: a.Error}
	dead := &messages.SendOutcome{Outcome: messages.OutcomeDead, Reason: a.Error}
	switch {
	case a.Code == 201 || a.Code == 200:
		return done(firstNonEmpty(a.BrokerMessageID, a.MessageID)), 0
	case a.Code == 409:
		dead.Reason = "idempotency_key_reused: " + a.Conflict
		return dead, 0
	case a.Code == 429:
		var after time.Duration
		if a.RetryAfterMs != nil {
			after = time.Duration(*a.RetryAfterMs) * time.Millisecond
		}
		return retry, after
	case a.Code >= 500:
		return retry, 0
	case a.Code >= 400:
		return dead, 0
	case a.Queued && a.Error == "": // the upstream broker's success
		return done(a.MessageID), 0
	case strings.HasPrefix(a.Error, "rate_limit") || strings.Contains(a.Error, "no connected peer"):
		return retry, 0
	}
	return dead, 0
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (d *Dispatcher) linkDown(ctx actor.Context) {
	d.conn = nil
	if len(d.inflight) == 0 {
		return
	}
	for id, f := range d.inflight {
		f.timer.Stop()
		delete(d.inflight, id)
	}
	ctx.Request(d.store, &messages.ReleaseMesh{Mesh: d.mesh, Now: time.Now().UnixMilli()})
}

func (d *Dispatcher) stopTimers() {
	if d.timer != nil {
		d.timer.Stop()
	}
	for _, f := range d.inflight {
		f.timer.Stop()
	}
}
