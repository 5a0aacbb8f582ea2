package actors

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

func nowMs() int64 { return time.Now().UnixMilli() }

// meshDispatch is what the store knows of one mesh's ready dispatcher.
type meshDispatch struct {
	pid     *actor.PID
	gen     uint64
	credit  int  // how many more rows the dispatcher can take
	due     bool // rows may be due: claim at the end of the batch
	maxAge  int64
	expired int64 // last max-age sweep, Unix ms
	// fast are the rows this batch's accepts inserted already claimed.
	fast []messages.ClaimedRow
}

// claimed is one mesh's claim, handed to its dispatcher after the commit.
type claimed struct {
	to    *meshDispatch
	claim *messages.ClaimedRows
	limit int  // the claim query's limit; 0: it did not run
	swept bool // the max-age sweep ran
}

// claimable reports whether msg is an accept whose row, if new, can be
// inserted already claimed: its dispatcher has room, and no older row of
// the mesh is due (a claim would pick exactly this row).
func (s *Store) claimable(msg any) bool {
	m, ok := msg.(*messages.AcceptSend)
	if !ok {
		return false
	}
	d := s.dispatch[m.Mesh]
	return d != nil && !d.due && d.credit > len(d.fast)
}

// note updates the dispatch state for one executed command: a ready
// dispatcher is registered, a released one forgotten, an outcome returns
// credit, a new row is taken for sending (claimedNow) or makes its mesh
// due, and requeued or woken rows make a mesh due.
func (s *Store) note(r storeRequest, reply any, claimedNow bool) {
	switch m := r.msg.(type) {
	case *messages.DispatchReady:
		s.dispatch[m.Mesh] = &meshDispatch{pid: r.sender, gen: m.Gen, credit: m.Window, due: true, maxAge: m.MaxAge}
	case *messages.ReleaseMesh:
		delete(s.dispatch, m.Mesh)
	case *messages.SendOutcome:
		if d := s.dispatch[m.Mesh]; d != nil && d.gen == m.Gen {
			d.credit++
		}
	case *messages.DispatchWake:
		if d := s.dispatch[m.Mesh]; d != nil {
			d.due = true
		}
	case *messages.AcceptSend:
		res, ok := reply.(*messages.AcceptResult)
		d := s.dispatch[m.Mesh]
		switch {
		case !ok || !res.Inserted || d == nil:
		case claimedNow:
			d.fast = append(d.fast, messages.ClaimedRow{ID: m.RowID, ClientMessageID: m.ClientMessageID,
				Payload: m.Payload, Attempts: 1})
		default:
			d.due = true
		}
	case *messages.RequeueOutbox:
		if res, ok := reply.(*messages.RequeueResult); ok && res.Err == nil {
			for _, d := range s.dispatch {
				d.due = true
			}
		}
	}
}

// claim gathers, in the batch's outbox transaction, what each ready mesh's
// dispatcher gets: the rows its accepts inserted claimed, and, when the
// mesh may have due rows and credit is left, a claim: rows past their max
// age go dead (at most once per ExpireEvery), then due rows move to
// inflight (attempts+1). A claim that fails is logged and dropped; the mesh
// stays due.
func (s *Store) claim(b *persistence.Batch) []claimed {
	var out []claimed
	now := nowMs()
	for mesh, d := range s.dispatch {
		c := claimed{to: d, claim: &messages.ClaimedRows{Gen: d.gen, Rows: d.fast}}
		d.fast = nil
		if room := d.credit - len(c.claim.Rows); d.due && room > 0 {
			c.limit, c.swept = room, d.maxAge > 0 && now-d.expired >= ExpireEvery.Milliseconds()
			err := b.Do(func(tx *sqlx.Tx) error {
				return s.claimDue(tx, mesh, &c, now)
			})
			if err != nil {
				s.log.Error("claim due rows", "mesh", mesh, "err", err)
				c.limit, c.swept = 0, false
			}
		}
		if c.limit > 0 || len(c.claim.Rows) > 0 {
			out = append(out, c)
		}
	}
	return out
}

func (s *Store) claimDue(tx *sqlx.Tx, mesh string, c *claimed, now int64) error {
	out := c.claim
	var err error
	if c.swept {
		if out.Expired, err = s.outbox.ExpireOld(tx, mesh, now-c.to.maxAge, now); err != nil {
			return err
		}
	}
	rows, err := s.outbox.ClaimDue(tx, mesh, now, c.limit)
	if err != nil {
		return err
	}
	for _, r := range rows {
		out.Rows = append(out.Rows, messages.ClaimedRow{ID: r.ID, ClientMessageID: r.ClientMessageID, Payload: r.Payload, Attempts: r.Attempts})
	}
	if len(rows) == c.limit {
		c.limit = -1 // filled: more rows may be due
	}
	out.NextDue, out.HasNext, err = s.outbox.NextDue(tx, mesh)
	return err
}

// hand gives each committed claim to its dispatcher and charges its
// credit. A claim query that filled its limit leaves the mesh due: more
// rows may wait for the credit its outcomes return.
func (s *Store) hand(ctx actor.Context, claims []claimed) {
	now := nowMs()
	for _, c := range claims {
		d := c.to
		if c.swept {
			d.expired = now
		}
		if c.limit != 0 {
			d.due = c.limit < 0
		}
		d.credit -= len(c.claim.Rows)
		if len(c.claim.Rows) > 0 || c.claim.Expired > 0 || c.claim.HasNext {
			ctx.Send(d.pid, c.claim)
		}
	}
}

// sendOutcome applies a broker answer to its row. A row that is no longer
// inflight (requeued, expired) is left alone and reported.
func (s *Store) sendOutcome(tx *sqlx.Tx, m *messages.SendOutcome) (*messages.OutcomeApplied, error) {
	var err error
	switch m.Outcome {
	case messages.OutcomeDone:
		err = s.outbox.MarkDone(tx, m.RowID, m.BrokerMessageID, m.HistoryID, m.Now)
	case messages.OutcomeDead:
		err = s.outbox.MarkDead(tx, m.RowID, m.Reason, m.Now)
	default:
		err = s.outbox.Retry(tx, m.RowID, m.Reason, m.Next)
	}
	if errors.Is(err, persistence.ErrStateChanged) {
		return &messages.OutcomeApplied{StateChanged: true}, nil
	}
	return &messages.OutcomeApplied{}, err
}

// storeInbound inserts a received message; a new row that decrypted also
// gets its "message" event, in the same savepoint.
func (s *Store) storeInbound(tx *sqlx.Tx, m *messages.StoreInbound) (*messages.InboundStored, error) {
	it := m.Item
	row := &persistence.InboxRow{ID: it.ID, ClientMessageID: it.ClientMessageID, BrokerMessageID: optional(it.BrokerMessageID),
		Mesh: it.Mesh, Topic: optional(it.Topic), SenderPubkey: it.SenderPubkey, SenderName: it.SenderName,
		Body: it.Body, ReceivedAt: it.ReceivedAtMs, ReplyToID: optional(it.ReplyToID)}
	if len(it.Meta) > 0 {
		meta := string(it.Meta)
		row.Meta = &meta
	}
	inserted, err := s.inbox.Insert(tx, row)
	if err != nil || !inserted || it.Body == nil {
		return &messages.InboundStored{Inserted: inserted}, err
	}
	data, err := json.Marshal(&it)
	if err != nil {
		return nil, err
	}
	id, err := s.inbox.AppendEvent(tx, "message", data, it.ReceivedAtMs)
	if err != nil {
		return nil, err
	}
	return &messages.InboundStored{Inserted: true, Event: &messages.Event{ID: id, Name: "message", Data: data}}, nil
}

func (s *Store) listInbox(tx *sqlx.Tx, m *messages.ListInbox) (*messages.InboxPage, error) {
	rows, next, err := s.inbox.List(tx, persistence.InboxQuery{Since: m.Since, Topic: m.Topic, From: m.From, Mesh: m.Mesh,
		Limit: m.Limit, After: m.After})
	if errors.Is(err, persistence.ErrBadCursor) {
		return nil, &messages.Error{Status: 400, Code: messages.CodeInvalidQuery, Detail: "after is not a cursor from a previous page"}
	}
	if err != nil {
		return nil, err
	}
	page := &messages.InboxPage{Items: make([]messages.InboxItem, len(rows)), Next: next}
	for i := range rows {
		page.Items[i] = InboxItemOf(&rows[i])
	}
	return page, nil
}

// InboxItemOf renders an inbox row for the API.
func InboxItemOf(r *persistence.InboxRow) messages.InboxItem {
	it := messages.InboxItem{ID: r.ID, ClientMessageID: r.ClientMessageID, BrokerMessageID: messages.Deref(r.BrokerMessageID),
		Mesh: r.Mesh, Kind: "dm", Topic: messages.Deref(r.Topic), SenderPubkey: r.SenderPubkey, SenderName: r.SenderName,
		Body: r.Body, ReceivedAt: time.UnixMilli(r.ReceivedAt).UTC().Format(time.RFC3339Nano), ReceivedAtMs: r.ReceivedAt,
		ReplyToID: messages.Deref(r.ReplyToID)}
	if r.Topic != nil {
		it.Kind = "topic"
	}
	if r.Meta != nil {
		it.Meta = json.RawMessage(*r.Meta)
	}
	return it
}

func (s *Store) eventsSince(tx *sqlx.Tx, m *messages.EventsSince) (*messages.EventsPage, error) {
	evs, err := s.inbox.EventsAfter(tx, m.After, m.Limit)
	if errors.Is(err, persistence.ErrEventsGone) {
		return &messages.EventsPage{Gone: true}, nil
	}
	if err != nil {
		return nil, err
	}
	page := &messages.EventsPage{Events: make([]messages.Event, len(evs))}
	for i, e := range evs {
		page.Events[i] = messages.Event{ID: e.ID, Name: e.Name, Data: e.Data}
	}
	return page, nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Disk pressure checks (spec §4.15).
const (
	// pressureEvery spaces the measurements after durable batches.
	pressureEvery = 100 * time.Millisecond
	// pressureRecheck spaces them while the pressure is not normal, so that
	// the store notices the space coming back with no writes to prompt it.
	pressureRecheck = time.Second
)

// pressureTick is the store's recheck timer.
type pressureTick struct{}

// measure reads the disk pressure, records it, and on a rise out of normal
// appends an outbox_pressure_high event (entering and leaving degraded are
// logged too); while it is not normal a timer measures again.
func (s *Store) measure(ctx actor.Context) {
	if s.pressure == nil {
		return
	}
	before := s.pressure.Level()
	if s.measured.IsZero() {
		before = persistence.PressureNormal // the store's first look reports what it finds
	}
	r, err := s.pressure.Measure()
	s.measured = time.Now()
	if err != nil {
		s.log.Warn("measure disk pressure", "err", err)
		return
	}
	s.metrics.DiskPct.WithLabelValues("outbox").Set(r.OutboxPct)
	s.metrics.DiskPct.WithLabelValues("free").Set(r.DiskPct)
	switch {
	case r.Level > persistence.PressureNormal && before == persistence.PressureNormal:
		s.log.Warn("outbox_pressure_high", "level", r.Level.String(), "outbox_pct", r.OutboxPct, "disk_pct", r.DiskPct,
			"outbox_bytes", r.OutboxBytes, "free_bytes", r.FreeBytes)
		data, _ := json.Marshal(map[string]any{"level": r.Level.String(), "outbox_pct": r.OutboxPct, "disk_pct": r.DiskPct,
			"outbox_bytes": r.OutboxBytes, "free_bytes": r.FreeBytes})
		ctx.Send(ctx.Self(), &messages.AppendEvent{Name: "outbox_pressure_high", Data: data})
	case r.Level == persistence.PressureNormal && before > persistence.PressureNormal:
		s.log.Info("outbox_pressure_normal", "outbox_pct", r.OutboxPct, "disk_pct", r.DiskPct)
	}
	switch degraded := persistence.PressureDegraded; {
	case r.Level == degraded && before != degraded:
		s.log.Error("daemon_degraded", "outbox_pct", r.OutboxPct, "disk_pct", r.DiskPct,
			"refused", "sends (507) and new event streams (503) until space returns")
	case r.Level != degraded && before == degraded:
		s.log.Info("daemon_degraded_cleared", "level", r.Level.String())
	}
	if r.Level > persistence.PressureNormal && !s.rechecking {
		s.rechecking = true
		workers.SendLater(ctx, pressureRecheck, &pressureTick{})
	}
}
