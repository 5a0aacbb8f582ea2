package actors

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// The store's side of dispatching: the commands of the accept path and of
// the dispatchers, and the claims of due rows at the end of each batch.

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

// takesAtOnce says whether a new row of d's mesh goes out in its accept's
// own transaction: d's dispatcher has room for it and no older row of the
// mesh is due (a claim would pick exactly this row). A nil d (no ready
// dispatcher) takes nothing.
func (d *meshDispatch) takesAtOnce() bool { return d != nil && !d.due && d.credit > len(d.fast) }

// claimed is one mesh's claim, handed to its dispatcher after the commit.
type claimed struct {
	to    *meshDispatch
	claim *messages.ClaimedRows
	limit int  // the claim query's limit; 0: it did not run
	swept bool // the max-age sweep ran
}

// accept runs the §4.5 lookup and insert. A new row its mesh's dispatcher
// takes at once (takesAtOnce) is inserted already claimed and handed over
// after the commit; otherwise a new row makes its mesh due.
func (s *Store) accept(tx *persistence.Tx, m *messages.AcceptSend, _ *actor.PID) (*messages.AcceptResult, error) {
	d := s.kept.dispatch[m.Mesh]
	claim := d.takesAtOnce()
	res, err := s.outbox.Accept(tx, m, claim)
	switch {
	case err != nil || !res.Inserted || d == nil:
	case claim:
		d.fast = append(d.fast, messages.ClaimedRow{ID: m.RowID, ClientMessageID: m.ClientMessageID,
			Payload: m.Payload, Attempts: 1})
	default:
		d.due = true
	}
	return res, err
}

// requeue retires a row and inserts its successor; every mesh may then
// have a due row.
func (s *Store) requeue(tx *persistence.Tx, m *messages.RequeueOutbox, _ *actor.PID) (*messages.RequeueResult, error) {
	res, err := s.outbox.Requeue(tx, m)
	if err == nil {
		for _, d := range s.kept.dispatch {
			d.due = true
		}
	}
	return res, err
}

// dispatchReady registers the mesh's dispatcher (from) with its credit and
// returns the rows a previous link left inflight to pending: all of the
// mesh's rows may be due.
func (s *Store) dispatchReady(tx *persistence.Tx, m *messages.DispatchReady, from *actor.PID) (*messages.OutcomeApplied, error) {
	s.kept.dispatch[m.Mesh] = &meshDispatch{pid: from, gen: m.Gen, credit: m.Window, due: true, maxAge: m.MaxAge}
	_, err := s.outbox.ReleaseMesh(tx, m.Mesh, m.Now)
	return &messages.OutcomeApplied{}, err
}

// dispatchWake makes a mesh due: its dispatcher's timer for the next due
// row fired.
func (s *Store) dispatchWake(_ *persistence.Tx, m *messages.DispatchWake, _ *actor.PID) (*none, error) {
	if d := s.kept.dispatch[m.Mesh]; d != nil {
		d.due = true
	}
	return nil, nil
}

// releaseMesh returns a mesh's inflight rows to pending and forgets its
// dispatcher: its link is gone.
func (s *Store) releaseMesh(tx *persistence.Tx, m *messages.ReleaseMesh, _ *actor.PID) (*messages.OutcomeApplied, error) {
	delete(s.kept.dispatch, m.Mesh)
	_, err := s.outbox.ReleaseMesh(tx, m.Mesh, m.Now)
	return &messages.OutcomeApplied{}, err
}

// sendOutcome applies a broker answer to its row and returns the slot's
// credit to the dispatcher of the link it was claimed under. A row that is
// no longer inflight (requeued, expired) is left alone and reported.
func (s *Store) sendOutcome(tx *persistence.Tx, m *messages.SendOutcome, _ *actor.PID) (*messages.OutcomeApplied, error) {
	if d := s.kept.dispatch[m.Mesh]; d != nil && d.gen == m.Gen {
		d.credit++
	}
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

// claim gathers, in the batch's outbox transaction, what each ready mesh's
// dispatcher gets: the rows its accepts inserted claimed, and, when the
// mesh may have due rows and credit is left, a claim: rows past their max
// age go dead (at most once per ExpireEvery), then due rows move to
// inflight (attempts+1). A claim that fails is logged and dropped; the mesh
// stays due.
func (s *Store) claim(b *persistence.Batch) []claimed {
	var out []claimed
	now := nowMs()
	for mesh, d := range s.kept.dispatch {
		room := d.credit - len(d.fast)
		if len(d.fast) == 0 && (!d.due || room <= 0) {
			continue // nothing to hand over, nothing to claim
		}
		c := claimed{to: d, claim: &messages.ClaimedRows{Gen: d.gen, Rows: d.fast}}
		d.fast = nil
		if d.due && room > 0 {
			c.limit, c.swept = room, d.maxAge > 0 && now-d.expired >= ExpireEvery.Milliseconds()
			err := b.Do(func(tx *persistence.Tx) error {
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

func (s *Store) claimDue(tx *persistence.Tx, mesh string, c *claimed, now int64) error {
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
		c.limit = -1 // filled: more rows may be due, and are claimed as credit returns
		return nil
	}
	// Whatever is pending now is not due yet: the dispatcher's timer wakes
	// the mesh when the first is.
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
