package actors

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/transport/ipc/metrics"
)

// DefaultMaxBatch bounds how many commands share one transaction.
const DefaultMaxBatch = 256

// OutcomeDelay is how long a send outcome may wait for a batch to ride
// along with before it commits on its own. An outcome answers no caller
// and needs no fsync, but alone it would still cost a transaction per
// message; held back, outcomes join the accepts' batches.
const OutcomeDelay = 10 * time.Millisecond

// Store is the only owner of the daemon's SQLite handles (outbox.db and
// inbox.db). What it does with each message type is one entry of its
// command table (store_commands.go).
//
// Group commit: every command it receives is queued, and the first one of a
// batch sends the store a flush marker. Because the mailbox is FIFO, every
// command that arrived before the marker joins the batch; when the marker
// comes up, the batch runs in one BEGIN IMMEDIATE transaction per database
// it touches, commits, and only then is each sender answered (after the
// WAL fsync, for the commands whose answer promises it: durability). A
// command whose writes must stand or fall together runs in a SAVEPOINT of
// its own, so that its failure leaves its neighbours' work intact; a
// single statement is atomic without one. A batch also runs as soon as it
// holds DefaultMaxBatch commands. Under load one fsync covers many
// commands; when idle, a command waits for no timer — except a send
// outcome, which waits up to OutcomeDelay for a batch to join (hold).
type Store struct {
	outbox  *persistence.Outbox
	inbox   *persistence.Inbox
	hooks   *persistence.Hooks // nil: the hook commands fail (store_hooks.go)
	events  *actor.PID         // every committed event goes there, in id order
	metrics *metrics.Daemon
	log     *slog.Logger
	batch   batching
	durable durability
	watch   pressureWatch
	kept    *storeKept
	faults  *Faults // nil but in tests
}

// batching is the group commit's state: the commands gathered for the next
// transaction.
type batching struct {
	max         int
	queue       []storeRequest
	flushQueued bool // a flush marker is in the mailbox
	// held are send outcomes waiting for the next batch (OutcomeDelay);
	// holding says a timer will flush them.
	held    []storeRequest
	holding bool
	replies []any // run's buffer, reused
}

// progress is how far run has taken a batch, which its recovery from a
// panic goes by.
type progress struct {
	durable   bool // a command promises a durable outbox.db (durable)
	committed [databases]bool
	// syncerHolds says outbox.db's syncer holds the replies of the commands
	// that promise durability, and sends them: a failure of the rest of
	// the batch must not answer those a second time.
	syncerHolds bool
	handed      bool // the claims went to the dispatchers
}

// storeKept is what survives a restart of the store actor, like the
// database handles: NewStore makes it once and every instance the producer
// makes shares it.
type storeKept struct {
	// dispatch is each ready mesh's dispatcher (DispatchReady).
	dispatch map[string]*meshDispatch
	// passes is the retention's state, so that one chain of passes runs.
	passes retentionPasses
	// broken is each database's first failed WAL fsync (outbox.db's, then
	// inbox.db's). Once outbox.db's is set the store refuses the commands
	// that promise durability, and inbox.db's syncer acks nothing more: no
	// later fsync can be trusted (walSyncer.broken). Health reports it; a
	// restart of the daemon clears it.
	broken [2]error
}

// storeRequest is one queued command: the message, its table entry and who
// gets the reply (nil: nobody).
type storeRequest struct {
	msg    any
	cmd    *command
	sender *actor.PID
}

// request is msg as a queued command whose reply goes to sender; its cmd
// is nil when the table has no entry for msg's type.
func request(msg any, sender *actor.PID) storeRequest {
	return storeRequest{msg: msg, cmd: commands[reflect.TypeOf(msg)], sender: sender}
}

// flush is the store's own end-of-drain marker; flushHeld is its
// OutcomeDelay timer.
type (
	flush     struct{}
	flushHeld struct{}
)

// StoreOptions are what the store works with.
type StoreOptions struct {
	Outbox   *persistence.Outbox
	Inbox    *persistence.Inbox
	Hooks    *persistence.Hooks    // hooks.db, the agent-hook outbox (nil: none)
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
	kept := &storeKept{dispatch: map[string]*meshDispatch{}, passes: retentionPasses{keep: o.Retention}}
	syncs := [2]func() error{}
	if o.Faults != nil {
		syncs = [2]func() error{o.Faults.SyncOutboxWAL, o.Faults.SyncInboxWAL}
	}
	if syncs[outboxDB] == nil && o.Outbox != nil {
		syncs[outboxDB] = o.Outbox.DB.SyncWAL
	}
	if syncs[inboxDB] == nil && o.Inbox != nil {
		syncs[inboxDB] = o.Inbox.DB.SyncWAL
	}
	return func() actor.Actor {
		return &Store{outbox: o.Outbox, inbox: o.Inbox, hooks: o.Hooks, events: o.Events, metrics: o.Metrics,
			log: o.Log.With("actor", "store"), batch: batching{max: DefaultMaxBatch},
			durable: durability{fsync: o.Fsync, sync: syncs}, watch: pressureWatch{pressure: o.Pressure}, kept: kept,
			faults: o.Faults}
	}
}

// Receive handles one message: the actor's lifecycle and its own timers
// here, every command through the table.
func (s *Store) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.started(ctx)
	case *actor.Stopped:
	case *actor.Restarting:
		s.closeSyncers()
	case *actor.Stopping:
		s.batch.queue = append(s.batch.queue, s.durable.next...)
		s.run(ctx) // held outcomes and waiting accepts
		s.syncWAL()
		s.closeSyncers()
	case *flush:
		s.batch.flushQueued = false
		s.run(ctx)
	case *flushHeld:
		s.batch.holding = false
		s.run(ctx)
	case *walSynced:
		s.walSynced(ctx, msg)
	case *syncOutbox:
		s.durable.syncArmed = false
		s.syncWAL()
	case *pressureTick:
		s.watch.rechecking = false
		s.measure(ctx)
	case *messages.MeasurePressure:
		s.measure(ctx)
	case *messages.SetRetention:
		s.kept.passes.keep = msg.Retention
	case *retentionTick:
		s.retain(ctx)
	case *messages.Pruned:
		s.retained(ctx, msg)
	default:
		if r := request(msg, ctx.Sender()); r.cmd != nil {
			s.enqueue(ctx, r)
			return
		}
		s.log.Warn("unhandled message", "type", fmt.Sprintf("%T", msg))
	}
}

// started starts the WAL syncers, measures the disk (a daemon started on
// a full disk refuses sends from the first), starts the retention passes
// once, and assumes a predecessor left an answered accept unsynced.
func (s *Store) started(ctx actor.Context) {
	s.startSyncers(ctx)
	s.measure(ctx)
	if !s.kept.passes.started {
		s.kept.passes.started = true
		s.scheduleRetention(ctx, RetentionFirst)
	}
	if s.durable.fsync.Mode() != config.FsyncStrict {
		// A restarted actor does not know whether its predecessor left an
		// answered accept unsynced: assume it did (a spare fsync).
		s.deferSync(ctx)
	}
}

// enqueue queues a command: a send outcome is held, a command that needs a
// durable outbox.db is refused once its fsyncs are broken, or waits for the
// fsync under way unless it may commit beside it (mayCommitNow); the rest
// joins the next batch.
func (s *Store) enqueue(ctx actor.Context, r storeRequest) {
	switch {
	case r.cmd.hold:
		s.hold(ctx, r)
		return
	case r.cmd.promises(outboxDB) && s.kept.broken[outboxDB] != nil:
		if r.sender != nil {
			ctx.Send(r.sender, s.refusal(r))
		}
		return
	case r.cmd.promises(outboxDB) && !s.mayCommitNow(r):
		s.durable.next = append(s.durable.next, r)
		return
	}
	s.batch.queue = append(s.batch.queue, r)
	if len(s.batch.queue) >= s.batch.max {
		s.run(ctx)
		return
	}
	if !s.batch.flushQueued {
		s.batch.flushQueued = true
		ctx.Send(ctx.Self(), &flush{})
	}
}

// hold keeps a send outcome for the next batch, arming the OutcomeDelay
// timer if none is armed; a full hold runs at once.
func (s *Store) hold(ctx actor.Context, r storeRequest) {
	s.batch.held = append(s.batch.held, r)
	if len(s.batch.held) >= s.batch.max {
		s.run(ctx)
		return
	}
	if !s.batch.holding {
		s.batch.holding = true
		workers.SendLater(ctx, OutcomeDelay, &flushHeld{})
	}
}

// Label values of the store's commit metric: every commit is relaxed, and
// walSync labels the fsyncs done apart from them (the syncers', and
// syncWAL's under fsync_mode batched_50ms and off).
const (
	relaxed = "relaxed"
	walSync = "wal_sync"
)

// run executes the queued batch and answers every sender after the commit
// (or, for what promises durability, after the fsync). If a database's
// transaction cannot begin or commit, every command on it gets the error
// and nothing of its part of the batch is stored.
func (s *Store) run(ctx actor.Context) {
	if len(s.batch.held) > 0 { // they came first
		s.batch.queue, s.batch.held = append(s.batch.held, s.batch.queue...), s.batch.queue[:0]
	}
	reqs := s.batch.queue
	if len(reqs) == 0 {
		return
	}
	replies := s.replyBuffer(len(reqs))
	var (
		batches [databases]*persistence.Batch
		claims  []claimed
	)
	done := progress{durable: durable(reqs)}
	defer func() {
		if p := recover(); p != nil {
			for _, b := range batches {
				if b != nil {
					b.Rollback()
				}
			}
			switch {
			case !done.committed[outboxDB]:
				for _, d := range s.kept.dispatch {
					d.fast = nil // not committed
				}
			case !done.handed: // committed inflight: they go out all the same
				s.hand(ctx, claims)
			}
			s.failAll(reqs, replies, func(r storeRequest) bool { return !done.syncerHolds || !r.cmd.promises(outboxDB) },
				fmt.Errorf("store panic: %v", p))
		}
		s.answer(ctx, reqs, replies)
	}()
	s.execute(reqs, replies, &batches)
	if batches[outboxDB] != nil {
		claims = s.claim(batches[outboxDB])
	}
	full := s.commit(ctx, reqs, replies, &batches, &done)
	if s.faults.storePanics() {
		panic("injected: the store panics after a commit")
	}
	if !done.committed[outboxDB] {
		claims = nil // nothing was claimed
	}
	s.metrics.StoreBatch.Observe(float64(len(reqs)))
	s.log.Debug("batch committed", "commands", len(reqs))
	done.handed = true
	s.hand(ctx, claims)
	s.publish(ctx, reqs, replies)
	s.afterCommit(ctx, reqs, replies, &done, batches[outboxDB] != nil, full)
}

// execute runs each command of the batch in its database's transaction,
// begun at the first command that needs it; a database whose transaction
// cannot begin fails its commands.
func (s *Store) execute(reqs []storeRequest, replies []any, batches *[databases]*persistence.Batch) {
	dbs := [databases]*persistence.DB{s.outbox.DB, s.inbox.DB, nil}
	if s.hooks != nil {
		dbs[hooksDB] = s.hooks.DB
	}
	var begun [databases]error
	for i, r := range reqs {
		db := r.cmd.db
		if dbs[db] == nil && begun[db] == nil {
			begun[db] = errNoHooksDB
		}
		if batches[db] == nil && begun[db] == nil {
			batches[db], begun[db] = dbs[db].Begin(context.Background())
		}
		if begun[db] != nil {
			replies[i] = failed(r, begun[db])
			continue
		}
		replies[i] = s.exec(batches[db], r)
	}
}

// exec runs one command, in a savepoint of its own if it has several
// writes, and returns its reply.
func (s *Store) exec(b *persistence.Batch, r storeRequest) any {
	var reply any
	run := func(tx *persistence.Tx) (err error) {
		reply, err = r.cmd.run(s, tx, r.msg, r.sender)
		return err
	}
	var err error
	if r.cmd.savepoint {
		err = b.Do(run)
	} else {
		err = run(b.Tx())
	}
	if err != nil {
		if r.sender == nil { // nobody hears of it otherwise
			s.log.Error("store command failed", "command", fmt.Sprintf("%T", r.msg), "err", err)
		}
		return failed(r, err)
	}
	return reply
}

// commit commits each database's part of the batch, marking in done each
// that did, and reports whether a commit found the disk full; a failed
// commit fails that part's commands. outbox.db's part comes first, and its
// fsync starts as soon as it is committed (syncCommitted).
func (s *Store) commit(ctx actor.Context, reqs []storeRequest, replies []any, batches *[databases]*persistence.Batch,
	done *progress) (full bool) {
	for db, b := range batches {
		if b == nil {
			continue
		}
		start := time.Now()
		err := b.Commit()
		s.metrics.StoreCommit.WithLabelValues(dbNames[db], relaxed).Observe(time.Since(start).Seconds())
		if err != nil {
			full = full || persistence.IsFull(err)
			s.failAll(reqs, replies, func(r storeRequest) bool { return r.cmd.db == database(db) },
				fmt.Errorf("commit: %w", err))
			continue
		}
		done.committed[db] = true
		if database(db) == outboxDB && done.durable {
			done.syncerHolds = s.syncCommitted(ctx, reqs, replies)
		}
	}
	return full
}

// durable says whether a command of the batch promises a durable outbox.db.
func durable(reqs []storeRequest) bool {
	for _, r := range reqs {
		if r.cmd.promises(outboxDB) {
			return true
		}
	}
	return false
}

// syncCommitted sees to the fsync that a committed outbox.db part waits
// for (syncOutbox) and, when its syncer has work now (strict), yields the
// store's processor to it and reports that the syncer holds the replies. The syncer has just been made runnable on this
// processor, behind the store: unless the other one is idle, it would
// start the fsync only once the store had committed inbox.db, handed the
// rows to the dispatchers, published the events and drained its mailbox —
// 0.1 ms on average at one sender's pace, all of it added to the caller's
// answer. Yielding starts the fsync first; the store goes on beside it.
func (s *Store) syncCommitted(ctx actor.Context, reqs []storeRequest, replies []any) (syncerHolds bool) {
	s.syncOutbox(ctx, reqs, replies)
	if s.durable.fsync.Mode() != config.FsyncStrict {
		return false
	}
	runtime.Gosched()
	return true
}

// afterCommit measures the disk after durable batches (at most every
// pressureEvery) and when the disk filled up, and hands inbox.db's owed
// replies to its syncer once the batch's events are published from them.
func (s *Store) afterCommit(ctx actor.Context, reqs []storeRequest, replies []any, done *progress, onOutbox, full bool) {
	if onOutbox && (full || done.durable && time.Since(s.watch.measured) >= pressureEvery) {
		s.measure(ctx)
	}
	if done.committed[inboxDB] {
		s.syncInbox(reqs, replies)
	}
}

// answer sends every reply still owed (the syncers took those that wait
// for an fsync) and empties the batch.
func (s *Store) answer(ctx actor.Context, reqs []storeRequest, replies []any) {
	for i, r := range reqs {
		if r.sender != nil && replies[i] != nil {
			ctx.Send(r.sender, replies[i])
		}
	}
	clear(reqs)
	clear(replies)
	s.batch.queue = reqs[:0]
}

// replyBuffer is run's reply slice for n commands, reused between batches.
func (s *Store) replyBuffer(n int) []any {
	if cap(s.batch.replies) < n {
		s.batch.replies = make([]any, n)
	}
	return s.batch.replies[:n]
}

// publish hands the batch's committed events to the events actor. It is the
// one place events are published, so streams see them in id order.
func (s *Store) publish(ctx actor.Context, reqs []storeRequest, replies []any) {
	if s.events == nil {
		return
	}
	for i, r := range reqs {
		if replies[i] == nil {
			continue
		}
		if r.cmd.event != nil {
			if ev := r.cmd.event(replies[i]); ev != nil {
				ctx.Send(s.events, &messages.Publish{Event: *ev})
			}
		}
		if r.cmd.events != nil {
			for _, ev := range r.cmd.events(replies[i]) {
				ctx.Send(s.events, &messages.Publish{Event: ev})
			}
		}
	}
}

// failAll replaces the replies of the commands on picks with err.
func (s *Store) failAll(reqs []storeRequest, replies []any, on func(storeRequest) bool, err error) {
	s.log.Error("store batch failed", "commands", len(reqs), "err", err)
	for i, r := range reqs {
		if on(r) {
			replies[i] = failed(r, err)
		}
	}
}
