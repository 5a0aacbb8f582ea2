package actors

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/actors/metrics"
	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// DefaultMaxBatch bounds how many commands share one transaction.
const DefaultMaxBatch = 256

// OutcomeDelay is how long a send outcome may wait for a batch to ride
// along with before it commits on its own. An outcome answers no caller
// and needs no fsync, but alone it would still cost a transaction per
// message; held back, outcomes join the accepts' batches.
const OutcomeDelay = 10 * time.Millisecond

// Store is the only owner of the daemon's SQLite handles (outbox.db and
// inbox.db).
//
// Group commit: every command it receives is queued, and the first one of a
// batch sends the store a flush marker. Because the mailbox is FIFO, every
// command that arrived before the marker joins the batch; when the marker
// comes up, the batch runs in one BEGIN IMMEDIATE transaction per database
// it touches, with a SAVEPOINT per command, commits, and only then is each
// sender answered. A batch also runs as soon as it holds DefaultMaxBatch
// commands. Under load one fsync covers many commands; when idle, a command
// waits for no timer — except a send outcome, which waits up to
// OutcomeDelay for a batch to join (see hold).
type Store struct {
	outbox   *persistence.Outbox
	inbox    *persistence.Inbox
	pressure *persistence.Pressure
	fsync    *config.FsyncPolicy
	metrics  *metrics.Daemon
	log      *slog.Logger
	maxBatch int
	// measured is when the disk pressure was last measured; rechecking
	// says a timer will measure it again (set while it is not normal).
	measured   time.Time
	rechecking bool

	batch       []storeRequest
	flushQueued bool
	// held are send outcomes waiting for the next batch (OutcomeDelay);
	// holding says a timer will flush them.
	held    []storeRequest
	holding bool
	// unsynced says an answered accept is committed but not yet fsynced
	// ([outbox] fsync_mode batched_50ms or off); syncArmed says the
	// BatchedSyncDelay timer will sync it.
	unsynced, syncArmed bool
	// dispatch is each ready mesh's dispatcher (DispatchReady); it
	// survives a restart of the actor, like the database handles.
	dispatch map[string]*meshDispatch
	claimNow bool // the accept being executed inserts its row claimed
	// events gets every committed event, in id order.
	events *actor.PID
	// passes is the retention's state; like dispatch it survives a restart
	// of the actor, so that one chain of passes runs.
	passes *retentionPasses
	// syncOutboxWAL and syncInboxWAL fsync the databases' WALs (tests
	// make them fail or wait).
	syncOutboxWAL, syncInboxWAL func() error
	// syncers fsync outbox.db's WAL (under strict) and inbox.db's apart
	// from the actor's goroutine, from Started to Stopping (walSyncer).
	syncers [2]*walSyncer
	// owedDurable counts the strict batches whose answers wait for
	// outbox.db's syncer. While maxOwedDurable of them wait, accepts,
	// requeues and drops wait in durableNext, and commit together once an
	// fsync is done (walSynced). Everything else runs meanwhile.
	owedDurable int
	durableNext []storeRequest
	// broken is each database's first failed WAL fsync (outbox.db's, then
	// inbox.db's); like dispatch it survives a restart of the actor. Once
	// outbox.db's is set the store refuses accepts, requeues and drops,
	// and inbox.db's syncer acks nothing more: no later fsync can be
	// trusted (walSyncer.broken). Health reports it; a restart clears it.
	broken *[2]error
}

// maxOwedDurable is how many strict batches may wait for outbox.db's
// syncer at once: one whose fsync runs, and one committed meanwhile, whose
// rows are already on their way while it waits for the next fsync. More
// would commit a batch for every few accepts under load, each rewriting
// the same pages of the WAL; fewer would make an accept that arrives
// during an fsync wait for it before its row can go out.
const maxOwedDurable = 2

// walSynced is a syncer telling the store, after each fsync and before its
// replies go, how many owe calls the fsync covered and the failure that
// broke the syncer, if one did.
type walSynced struct {
	from   *walSyncer
	owes   int
	broken error
}

type storeRequest struct {
	msg    any
	sender *actor.PID
}

// flush is the store's own end-of-drain marker; flushHeld is its
// OutcomeDelay timer and syncOutbox its BatchedSyncDelay timer.
type (
	flush      struct{}
	flushHeld  struct{}
	syncOutbox struct{}
)

// StoreOptions are what the store works with.
type StoreOptions struct {
	Outbox   *persistence.Outbox
	Inbox    *persistence.Inbox
	Pressure *persistence.Pressure // measured after writes (nil: not watched)
	// Fsync is [outbox] fsync_mode (nil: strict).
	Fsync     *config.FsyncPolicy
	Retention messages.Retention
	// Events is the events actor: every committed event goes to it, in id
	// order (nil: none are published).
	Events  *actor.PID
	Metrics *metrics.Daemon
	Log     *slog.Logger

	// Faults may stand in for the WAL fsyncs (nil: none).
	Faults *Faults
}

// NewStore returns the store actor's producer. The databases stay open
// across restarts; their owner (the daemon) closes them after the actor
// system stops.
func NewStore(o StoreOptions) actor.Producer {
	dispatch := map[string]*meshDispatch{}
	passes := &retentionPasses{keep: o.Retention}
	broken := new([2]error)
	return func() actor.Actor {
		s := &Store{outbox: o.Outbox, inbox: o.Inbox, pressure: o.Pressure, fsync: o.Fsync, metrics: o.Metrics, events: o.Events,
			log: o.Log.With("actor", "store"), maxBatch: DefaultMaxBatch, dispatch: dispatch, passes: passes,
			broken: broken}
		if o.Faults != nil {
			s.syncOutboxWAL, s.syncInboxWAL = o.Faults.SyncOutboxWAL, o.Faults.SyncInboxWAL
		}
		if s.syncOutboxWAL == nil && o.Outbox != nil {
			s.syncOutboxWAL = o.Outbox.DB.SyncWAL
		}
		if s.syncInboxWAL == nil && o.Inbox != nil {
			s.syncInboxWAL = o.Inbox.DB.SyncWAL
		}
		return s
	}
}

// Receive handles one message.
func (s *Store) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.startSyncers(ctx)
		s.measure(ctx) // a daemon started on a full disk refuses sends from the first
		if !s.passes.started {
			s.passes.started = true
			s.scheduleRetention(ctx, RetentionFirst)
		}
		if s.fsync.Mode() != config.FsyncStrict {
			// A restarted actor does not know whether its predecessor left
			// an answered accept unsynced: assume it did (a spare fsync).
			s.deferSync(ctx)
		}
	case *actor.Stopped:
	case *actor.Restarting:
		s.closeSyncers()
	case *actor.Stopping:
		s.batch = append(s.batch, s.durableNext...)
		s.run(ctx) // held outcomes and waiting accepts
		s.syncWAL()
		s.closeSyncers()
	case *flush:
		s.flushQueued = false
		s.run(ctx)
	case *walSynced:
		switch msg.from { // a syncer of a predecessor is not heard
		case s.syncers[0]:
			s.breakWAL(0, msg.broken)
			s.synced(ctx, msg.owes)
		case s.syncers[1]:
			s.breakWAL(1, msg.broken)
		}
	case *flushHeld:
		s.holding = false
		s.run(ctx)
	case *syncOutbox:
		s.syncArmed = false
		s.syncWAL()
	case *pressureTick:
		s.rechecking = false
		s.measure(ctx)
	case *messages.MeasurePressure:
		s.measure(ctx)
	case *messages.SetRetention:
		s.passes.keep = msg.Retention
	case *retentionTick:
		s.retain(ctx)
	case *messages.Pruned:
		s.retained(ctx, msg)
	case *messages.AcceptSend, *messages.RequeueOutbox, *messages.DropOutbox, *messages.ListOutbox, *messages.OutboxStats,
		*messages.DispatchReady, *messages.DispatchWake, *messages.SendOutcome, *messages.ReleaseMesh,
		*messages.StoreInbound, *messages.ListInbox, *messages.EventsSince, *messages.AppendEvent,
		*messages.PruneInbox, *messages.PruneOutbox:
		s.enqueueFrom(ctx, msg, ctx.Sender())
	default:
		s.log.Warn("unhandled message", "type", fmt.Sprintf("%T", msg))
	}
}

// startSyncers starts the WAL syncers: outbox.db's answers the accepts
// (and requeues and drops) of a strict batch once they are on disk, and
// fails them if the fsync fails; inbox.db's answers the stores of messages
// and events, InboxSyncDelay after the first, and fails the stores of
// messages (no client_ack) if the fsync fails.
func (s *Store) startSyncers(ctx actor.Context) {
	root, self := ctx.ActorSystem().Root, ctx.Self()
	start := func(db int, sync func() error, delay time.Duration, owes func(any) bool, fail func(any, error) any) {
		commits := s.metrics.StoreCommit.WithLabelValues(dbNames[db], walSync)
		s.syncers[db] = (&walSyncer{sync: sync, delay: delay, owes: owes, fail: fail, root: root, store: self,
			observe: func(d time.Duration) { commits.Observe(d.Seconds()) }, broken: s.broken[db]}).start()
	}
	if s.syncOutboxWAL != nil {
		start(0, s.syncOutboxWAL, 0, needsDurability, func(cmd any, err error) any {
			return failed(cmd, &messages.Error{Status: http.StatusServiceUnavailable, Code: messages.CodeUnavailable,
				Detail: "committed, but the disk failed to sync it (" + err.Error() + "): the message may have been sent; " +
					"retry with the same client_message_id"})
		})
	}
	if s.syncInboxWAL != nil {
		start(1, s.syncInboxWAL, InboxSyncDelay, inboxWrite, func(cmd any, err error) any {
			if _, ok := cmd.(*messages.StoreInbound); ok {
				return failed(cmd, err)
			}
			return nil
		})
	}
}

// breakWAL records db's first failed fsync (see Store.broken).
func (s *Store) breakWAL(db int, err error) {
	if err == nil || s.broken[db] != nil {
		return
	}
	s.broken[db] = err
	refused := "no message is acked"
	if db == 0 {
		refused = "no sends are taken"
	}
	s.log.Error("wal_fsync_failed", "db", dbNames[db], "err", err, "until_restart", refused)
}

// refusal answers a command that needs a durable outbox.db once its fsyncs
// are broken.
func (s *Store) refusal(cmd any) any {
	return failed(cmd, &messages.Error{Status: http.StatusServiceUnavailable, Code: messages.CodeDegraded,
		Detail: "outbox.db could not be synced to disk (" + s.broken[0].Error() + "): the daemon takes no sends, " +
			"requeues or drops until it is restarted; what it accepted before is still delivered"})
}

// syncBroken names the databases whose fsyncs are broken, with the error,
// for /v1/health ("" when none is).
func (s *Store) syncBroken() string {
	var parts []string
	for db, err := range s.broken {
		if err != nil {
			parts = append(parts, dbNames[db]+": "+err.Error())
		}
	}
	return strings.Join(parts, "; ")
}

// closeSyncers answers what waits for a WAL fsync and stops the syncers.
func (s *Store) closeSyncers() {
	for i, y := range s.syncers {
		if y != nil {
			y.close()
			s.syncers[i] = nil
		}
	}
}

// synced runs the accepts that waited for outbox.db's fsync once fewer
// than maxOwedDurable strict batches wait for one.
func (s *Store) synced(ctx actor.Context, owes int) {
	s.owedDurable -= owes
	if s.owedDurable >= maxOwedDurable || len(s.durableNext) == 0 {
		return
	}
	s.batch = append(s.batch, s.durableNext...)
	clear(s.durableNext)
	s.durableNext = s.durableNext[:0]
	s.run(ctx)
}

// enqueueFrom queues a command whose reply goes to sender.
func (s *Store) enqueueFrom(ctx actor.Context, msg any, sender *actor.PID) {
	if _, ok := msg.(*messages.SendOutcome); ok {
		s.hold(ctx, storeRequest{msg: msg, sender: sender})
		return
	}
	if s.broken[0] != nil && needsDurability(msg) {
		if sender != nil {
			ctx.Send(sender, s.refusal(msg))
		}
		return
	}
	if s.owedDurable >= maxOwedDurable && needsDurability(msg) {
		s.durableNext = append(s.durableNext, storeRequest{msg: msg, sender: sender})
		return
	}
	s.batch = append(s.batch, storeRequest{msg: msg, sender: sender})
	if len(s.batch) >= s.maxBatch {
		s.run(ctx)
		return
	}
	if !s.flushQueued {
		s.flushQueued = true
		ctx.Send(ctx.Self(), &flush{})
	}
}

// hold keeps a send outcome for the next batch, arming the OutcomeDelay
// timer if none is armed; a full hold runs at once.
func (s *Store) hold(ctx actor.Context, r storeRequest) {
	s.held = append(s.held, r)
	if len(s.held) >= s.maxBatch {
		s.run(ctx)
		return
	}
	if !s.holding {
		s.holding = true
		workers.SendLater(ctx, OutcomeDelay, &flushHeld{})
	}
}

// needsDurability says whether a command's answer must wait for its
// outbox.db commit to be on disk: an accept, a requeue or a drop (the
// caller is told its message is stored, or given up). Everything else the
// dispatcher writes — claims, outcomes, releases — may be lost in a power
// cut: the row is then found inflight or pending at the next start and
// sent again, and the broker's dedupe answers the repeat. Both databases
// commit Relaxed; the fsyncs are the syncers' (and, under batched_50ms
// and off, syncWAL's).
func needsDurability(cmd any) bool {
	switch cmd.(type) {
	case *messages.AcceptSend, *messages.RequeueOutbox, *messages.DropOutbox:
		return true
	}
	return false
}

// deferSync notes an answered accept that is not on disk yet and, under
// batched_50ms, arms the timer that syncs it.
func (s *Store) deferSync(ctx actor.Context) {
	s.unsynced = true
	if s.syncArmed || s.fsync.Mode() != config.FsyncBatched {
		return
	}
	s.syncArmed = true
	workers.SendLater(ctx, config.BatchedSyncDelay, &syncOutbox{})
}

// syncWAL fsyncs outbox.db's WAL if an answered accept waits for it (under
// batched_50ms and off). A failed fsync breaks outbox.db (breakWAL).
func (s *Store) syncWAL() {
	if !s.unsynced {
		return
	}
	s.unsynced = false
	start := time.Now()
	err := s.syncOutboxWAL()
	s.metrics.StoreCommit.WithLabelValues(dbNames[0], walSync).Observe(time.Since(start).Seconds())
	s.breakWAL(0, err)
}

// Label values of the store's commit metric: every commit is relaxed, and
// walSync labels the fsyncs done apart from them (the syncers', and
// syncWAL's under fsync_mode batched_50ms and off).
var dbNames = [2]string{"outbox", "inbox"}

const (
	relaxed = "relaxed"
	walSync = "wal_sync"
)

// onInbox reports whether a command runs against inbox.db.
func onInbox(msg any) bool {
	switch msg.(type) {
	case *messages.StoreInbound, *messages.ListInbox, *messages.EventsSince, *messages.AppendEvent, *messages.PruneInbox:
		return true
	}
	return false
}

// run executes the queued batch and answers every sender after the commit.
// If a database's transaction cannot begin or commit, every command on it
// gets the error and nothing of its part of the batch is stored.
func (s *Store) run(ctx actor.Context) {
	if len(s.held) > 0 { // they came first
		s.batch, s.held = append(s.held, s.batch...), s.batch[:0]
	}
	if len(s.batch) == 0 {
		return
	}
	reqs := s.batch
	replies := make([]any, len(reqs))
	defer func() {
		for i, r := range reqs {
			if r.sender != nil && replies[i] != nil {
				ctx.Send(r.sender, replies[i])
			}
		}
		clear(reqs)
		s.batch = reqs[:0]
	}()
	dbs := [2]*persistence.DB{s.outbox.DB, s.inbox.DB}
	var batches [2]*persistence.Batch
	var begun [2]error
	defer func() {
		if p := recover(); p != nil {
			for _, b := range batches {
				if b != nil {
					b.Rollback()
				}
			}
			for _, d := range s.dispatch {
				d.fast = nil // not committed
			}
			s.failAll(reqs, replies, func(int) bool { return true }, fmt.Errorf("store panic: %v", p))
		}
	}()
	for i, r := range reqs {
		which := 0
		if onInbox(r.msg) {
			which = 1
		}
		if batches[which] == nil && begun[which] == nil {
			batches[which], begun[which] = dbs[which].Begin(context.Background())
		}
		if begun[which] != nil {
			replies[i] = failed(r.msg, begun[which])
			continue
		}
		s.claimNow = s.claimable(r.msg)
		replies[i] = s.execute(batches[which], r.msg)
		s.note(r, replies[i], s.claimNow)
	}
	var claims []claimed
	if batches[0] != nil {
		claims = s.claim(batches[0])
	}
	full := false // the disk filled up: measure the pressure now
	durable := slices.ContainsFunc(reqs, func(r storeRequest) bool { return needsDurability(r.msg) })
	committed := [2]bool{}
	for which, b := range batches {
		if b == nil {
			continue
		}
		start := time.Now()
		err := b.Commit()
		s.metrics.StoreCommit.WithLabelValues(dbNames[which], relaxed).Observe(time.Since(start).Seconds())
		if err != nil {
			full = full || persistence.IsFull(err)
			s.failAll(reqs, replies, func(i int) bool { return onInbox(reqs[i].msg) == (which == 1) }, fmt.Errorf("commit: %w", err))
			if which == 0 {
				claims = nil // nothing was claimed
			}
			continue
		}
		committed[which] = true
	}
	s.metrics.StoreBatch.Observe(float64(len(reqs)))
	if batches[0] != nil && (durable || full) && (full || time.Since(s.measured) >= pressureEvery) {
		s.measure(ctx)
	}
	s.log.Debug("batch committed", "commands", len(reqs))
	s.hand(ctx, claims)
	s.publish(ctx, replies)
	if committed[0] && durable {
		s.syncOutbox(ctx, reqs, replies)
	}
	if committed[1] {
		s.syncInbox(reqs, replies)
	}
}

// syncOutbox sees to the fsync of a batch that accepted, requeued or
// dropped: under strict its syncer answers those commands once the WAL is
// on disk, or with the error if the fsync fails; under batched_50ms and
// off they are answered now and the fsync deferred (deferSync). Either
// way the rows it claimed are already with the dispatchers: a message may
// reach the broker while its accept's fsync runs, never before its commit.
// Should that fsync fail, the caller's 5xx does not say the message was
// not sent: its retry, with the same client_message_id, finds the
// committed row, and the broker's dedupe the sent one.
func (s *Store) syncOutbox(ctx actor.Context, reqs []storeRequest, replies []any) {
	if s.fsync.Mode() != config.FsyncStrict {
		s.deferSync(ctx)
		return
	}
	s.unsynced = false // the syncer's fsync covers the whole WAL
	s.owedDurable++
	s.syncers[0].owe(reqs, replies)
}

// inboxWrite says whether a command stores a message or appends an event.
func inboxWrite(cmd any) bool {
	switch cmd.(type) {
	case *messages.StoreInbound, *messages.AppendEvent:
		return true
	}
	return false
}

// syncInbox hands the replies of a batch's stores of messages and events to
// the inbox syncer, which answers them once inbox.db's WAL is fsynced (the
// inbox actor sends its client_ack on that answer). The
// batch's events are already published: a local reader sees a message as
// soon as its commit is visible, without waiting for the disk. A power cut
// before the fsync loses the batch's rows and events, never a message: the
// broker, not acked, delivers it again, and a reader may see it twice (the
// same client_message_id); its event ids are not issued again
// (persistence.EventIDGap). The batch's other commands, reads of inbox.db
// included, are answered at once: they do not wait for it.
func (s *Store) syncInbox(reqs []storeRequest, replies []any) {
	if slices.ContainsFunc(reqs, func(r storeRequest) bool { return inboxWrite(r.msg) }) {
		s.syncers[1].owe(reqs, replies)
	}
}

// publish hands the batch's committed events to the events actor. It is the
// one place events are published, so streams see them in id order.
func (s *Store) publish(ctx actor.Context, replies []any) {
	if s.events == nil {
		return
	}
	for _, r := range replies {
		var ev *messages.Event
		switch r := r.(type) {
		case *messages.InboundStored:
			ev = r.Event
		case *messages.EventAppended:
			ev = r.Event
		}
		if ev != nil {
			ctx.Send(s.events, &messages.Publish{Event: *ev})
		}
	}
}

func (s *Store) failAll(reqs []storeRequest, replies []any, on func(int) bool, err error) {
	s.log.Error("store batch failed", "commands", len(reqs), "err", err)
	for i, r := range reqs {
		if on(i) {
			replies[i] = failed(r.msg, err)
		}
	}
}

// execute runs one command in its own savepoint and returns its reply.
func (s *Store) execute(b *persistence.Batch, msg any) any {
	var reply any
	err := b.Do(func(tx *sqlx.Tx) (err error) {
		reply, err = s.command(tx, msg)
		return err
	})
	if err != nil {
		return failed(msg, err)
	}
	return reply
}

func (s *Store) command(tx *sqlx.Tx, msg any) (any, error) {
	switch m := msg.(type) {
	case *messages.AcceptSend:
		return s.outbox.Accept(tx, m, s.claimNow)
	case *messages.RequeueOutbox:
		return s.outbox.Requeue(tx, m)
	case *messages.DropOutbox:
		return s.outbox.Drop(tx, m)
	case *messages.ListOutbox:
		return s.outbox.List(tx, m)
	case *messages.OutboxStats:
		counts, err := s.outbox.Counts(tx)
		return &messages.OutboxCounts{ByMesh: counts, SyncBroken: s.syncBroken()}, err
	case *messages.SendOutcome:
		return s.sendOutcome(tx, m)
	case *messages.ReleaseMesh:
		_, err := s.outbox.ReleaseMesh(tx, m.Mesh, m.Now)
		return &messages.OutcomeApplied{}, err
	case *messages.DispatchReady:
		_, err := s.outbox.ReleaseMesh(tx, m.Mesh, m.Now)
		return &messages.OutcomeApplied{}, err
	case *messages.DispatchWake:
		return nil, nil
	case *messages.StoreInbound:
		return s.storeInbound(tx, m)
	case *messages.ListInbox:
		return s.listInbox(tx, m)
	case *messages.EventsSince:
		return s.eventsSince(tx, m)
	case *messages.PruneInbox, *messages.PruneOutbox:
		return s.prune(tx, m)
	case *messages.AppendEvent:
		id, err := s.inbox.AppendEvent(tx, m.Name, m.Data, nowMs())
		return &messages.EventAppended{Event: &messages.Event{ID: id, Name: m.Name, Data: m.Data}}, err
	}
	return nil, fmt.Errorf("store: no command %T", msg)
}

// failed is the reply carrying err for a command of msg's type.
func failed(msg any, err error) any {
	if persistence.IsFull(err) {
		err = &messages.Error{Status: http.StatusInsufficientStorage, Code: messages.CodeInsufficientStorage,
			Detail: "the disk is full; nothing was stored: retry with the same client_message_id once there is space"}
	}
	switch msg.(type) {
	case *messages.AcceptSend:
		return &messages.AcceptResult{Err: err}
	case *messages.RequeueOutbox:
		return &messages.RequeueResult{Err: err}
	case *messages.DropOutbox:
		return &messages.DropResult{Err: err}
	case *messages.ListOutbox:
		return &messages.OutboxPage{Err: err}
	case *messages.OutboxStats:
		return &messages.OutboxCounts{Err: err}
	case *messages.SendOutcome, *messages.ReleaseMesh, *messages.DispatchReady:
		return &messages.OutcomeApplied{Err: err}
	case *messages.StoreInbound:
		return &messages.InboundStored{Err: err}
	case *messages.ListInbox:
		return &messages.InboxPage{Err: err}
	case *messages.EventsSince:
		return &messages.EventsPage{Err: err}
	case *messages.AppendEvent:
		return &messages.EventAppended{Err: err}
	case *messages.PruneInbox, *messages.PruneOutbox:
		return &messages.Pruned{Err: err}
	}
	return err
}
