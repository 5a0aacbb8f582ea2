package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// Retention timings.
const (
	// RetentionFirst is the delay from the store's start to its first
	// retention pass, RetentionEvery the delay between passes, and
	// RetentionCatchUp the delay after a pass that stopped at its limit.
	RetentionFirst   = time.Minute
	RetentionEvery   = time.Hour
	RetentionCatchUp = time.Second
	// RetentionBatch bounds the rows one pass changes in each table, so that
	// the batch carrying it stays short.
	RetentionBatch = 5000
	// RequestNoticeGrace is how long after a contact request ran out a
	// retention pass deletes the messages it held, if the route's inbox
	// actor has not (having told their senders first): the route of a
	// session that ended, or of a daemon stopped for longer.
	RequestNoticeGrace = day
)

// DefaultRetentionDays is what a Retention of 0 days keeps.
const DefaultRetentionDays = 30

// cutoff is the time before which what is kept days is let go.
func cutoff(now time.Time, days int) int64 {
	if days <= 0 {
		days = DefaultRetentionDays
	}
	return now.Add(-time.Duration(days) * day).UnixMilli()
}

// retentionTick starts a retention pass.
type retentionTick struct{}

// retentionPasses is the state of the store's retention: what it keeps,
// whether the chain of passes has started, how many parts of the pass in
// progress are still to answer, and whether one stopped at its limit.
type retentionPasses struct {
	keep    messages.Retention
	started bool
	pending int
	more    bool
}

const day = 24 * time.Hour

// scheduleRetention arms the timer of the next pass.
func (s *Store) scheduleRetention(ctx actor.Context, after time.Duration) {
	workers.SendLater(ctx, after, &retentionTick{})
}

// retain starts a pass: one command for each database, answered to the
// store itself (retained).
func (s *Store) retain(ctx actor.Context) {
	if s.kept.passes.pending > 0 {
		return // one is running; its end schedules the next
	}
	now, keep := time.Now(), s.kept.passes.keep
	s.kept.passes.pending, s.kept.passes.more = 2, false
	s.enqueue(ctx, request(&messages.PruneInbox{Before: cutoff(now, keep.InboxDays),
		EventsKeep: persistence.DefaultEventsKeep, EventsBefore: now.Add(-persistence.DefaultEventsMaxAge).UnixMilli(),
		Limit: RetentionBatch, Now: now.UnixMilli()}, ctx.Self()))
	s.enqueue(ctx, request(&messages.PruneOutbox{Before: cutoff(now, keep.OutboxDays),
		Limit: RetentionBatch}, ctx.Self()))
}

// retained takes one part's answer; when both are in, the next pass is
// scheduled — soon if a part stopped at its limit.
func (s *Store) retained(ctx actor.Context, p *messages.Pruned) {
	switch {
	case p.Err != nil:
		s.log.Error("retention_failed", "err", p.Err)
	case p.Inbox+p.Events+p.Outbox+p.Audit > 0:
		s.log.Info("retention_pass", "inbox_rows", p.Inbox, "events", p.Events, "outbox_payloads", p.Outbox,
			"audit_entries", p.Audit)
	}
	if p.Err == nil {
		s.metrics.Pruned.WithLabelValues("inbox").Add(float64(p.Inbox))
		s.metrics.Pruned.WithLabelValues("events").Add(float64(p.Events))
		s.metrics.Pruned.WithLabelValues("outbox_payloads").Add(float64(p.Outbox))
		s.metrics.Pruned.WithLabelValues("audit").Add(float64(p.Audit))
	}
	if p.Err == nil && p.InboxRows >= 0 {
		s.metrics.InboxRows.Set(float64(p.InboxRows))
		if n, err := persistence.FileBytes(s.inbox.Path()); err == nil {
			s.metrics.InboxBytes.Set(float64(n))
		}
	}
	s.kept.passes.more = s.kept.passes.more || p.More
	if s.kept.passes.pending--; s.kept.passes.pending > 0 {
		return
	}
	next := RetentionEvery
	if s.kept.passes.more {
		next = RetentionCatchUp
	}
	s.scheduleRetention(ctx, next)
}

// pruneInbox runs a pass's part on inbox.db: old inbox rows, then the
// event log beyond its bounds; the rows left are counted once the part is
// done (not at every catch-up pass).
func (s *Store) pruneInbox(tx *persistence.Tx, m *messages.PruneInbox, _ *actor.PID) (*messages.Pruned, error) {
	out := &messages.Pruned{InboxRows: -1}
	var err error
	if out.Inbox, err = s.inbox.Prune(tx, m.Before, m.Limit); err != nil {
		return nil, err
	}
	if out.Events, err = s.inbox.TrimEvents(tx, m.EventsKeep, m.EventsBefore, m.Limit); err != nil {
		return nil, err
	}
	held, err := s.inbox.PruneRequests(tx, m.Now-RequestNoticeGrace.Milliseconds(), m.Limit)
	if err != nil {
		return nil, err
	}
	out.Inbox += held
	out.More = out.Inbox >= int64(m.Limit) || out.Events >= int64(m.Limit)
	if !out.More {
		if out.InboxRows, err = s.inbox.Count(tx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pruneOutbox runs a pass's part on outbox.db: the payloads of old done
// and aborted rows, then the audit entries of the same age (the newest
// always stays: persistence.PruneAudit).
func (s *Store) pruneOutbox(tx *persistence.Tx, m *messages.PruneOutbox, _ *actor.PID) (*messages.Pruned, error) {
	n, err := s.outbox.CompactPayloads(tx, m.Before, m.Limit)
	if err != nil {
		return nil, err
	}
	a, err := s.outbox.PruneAudit(tx, m.Before, m.Limit)
	if err != nil {
		return nil, err
	}
	return &messages.Pruned{Outbox: n, Audit: a, InboxRows: -1, More: n >= int64(m.Limit) || a >= int64(m.Limit)}, nil
}
