package actors

import (
	"net/http"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
)

// Durability: when the replies that promise a batch is on disk go out.
// Both databases commit relaxed (in the WAL, visible, safe from a crash of
// the process); the fsyncs belong to the WAL syncers (store_walsync.go)
// and, under [outbox] fsync_mode batched_50ms and off, to syncWAL.

// durability is the store's state of fsyncs.
type durability struct {
	fsync *config.FsyncPolicy
	// sync fsyncs each database's WAL (DB.SyncWAL, or a test's Faults).
	sync [2]func() error
	// syncers fsync the WALs apart from the actor's goroutine, from
	// Started to Stopping.
	syncers [2]*walSyncer
	// unsynced says an answered accept is committed but not yet fsynced
	// (fsync_mode batched_50ms or off); syncArmed says the
	// BatchedSyncDelay timer will sync it.
	unsynced, syncArmed bool
	// owed counts the strict batches whose answers wait for outbox.db's
	// syncer. While maxOwedDurable of them wait, the commands that promise
	// durability wait in next, and commit together once an fsync is done
	// (synced). Everything else runs meanwhile.
	owed int
	next []storeRequest
}

// maxOwedDurable is how many strict batches may wait for outbox.db's
// syncer at once: one whose fsync runs, and one committed meanwhile, whose
// rows are already on their way while it waits for the next fsync. More
// would commit a batch for every few accepts under load, each rewriting
// the same pages of the WAL; fewer would make an accept that arrives
// during an fsync wait for it before its row can go out.
const maxOwedDurable = 2

// mayCommitNow says whether a command that promises durability may commit
// now rather than wait for the fsync under way: when none is under way,
// or, while one is (and fewer than maxOwedDurable batches wait), when it
// is an accept whose row would go out at once (meshDispatch.takesAtOnce).
// Any other waits, and commits with the others that waited once the fsync
// is done: a second batch for it would cost a commit and an fsync more and
// win nothing (its row would not leave before its own fsync anyway).
func (s *Store) mayCommitNow(r storeRequest) bool {
	switch {
	case s.durable.owed == 0:
		return true
	case s.durable.owed >= maxOwedDurable:
		return false
	}
	m, ok := r.msg.(*messages.AcceptSend)
	return ok && s.kept.dispatch[m.Mesh].takesAtOnce()
}

// syncOutbox is the store's BatchedSyncDelay timer.
type syncOutbox struct{}

// startSyncers starts the WAL syncers: outbox.db's answers the commands
// that promise durability (accepts, requeues, drops) of a strict batch once
// they are on disk, and fails them if the fsync fails; inbox.db's answers
// the stores of messages and events, InboxSyncDelay after the first, and
// fails them if the fsync fails (no client_ack).
func (s *Store) startSyncers(ctx actor.Context) {
	root, self := ctx.ActorSystem().Root, ctx.Self()
	delays := [2]time.Duration{outboxDB: 0, inboxDB: InboxSyncDelay}
	for db, sync := range s.durable.sync {
		if sync == nil {
			continue
		}
		commits := s.metrics.StoreCommit.WithLabelValues(dbNames[db], walSync)
		s.durable.syncers[db] = (&walSyncer{db: database(db), sync: sync, delay: delays[db], root: root,
			self: self, observe: func(d time.Duration) { commits.Observe(d.Seconds()) }, broken: s.kept.broken[db]}).start()
	}
}

// syncFailure is the error a reply that waited for db's fsync carries when
// the fsync failed.
func syncFailure(db database, err error) error {
	if db == inboxDB {
		return err // not acked: the broker pushes the message again
	}
	return &messages.Error{Status: http.StatusServiceUnavailable, Code: messages.CodeUnavailable,
		Detail: "committed, but the disk failed to sync it (" + err.Error() + "): the message may have been sent; " +
			"retry with the same client_message_id"}
}

// walSynced takes a syncer's report of an fsync: a failure breaks the
// database (a syncer of a predecessor is not heard), and outbox.db's
// covered batches let the waiting ones commit.
func (s *Store) walSynced(ctx actor.Context, msg *walSynced) {
	for db, y := range s.durable.syncers {
		if y != nil && y == msg.from {
			s.breakWAL(database(db), msg.broken)
			if database(db) == outboxDB {
				s.synced(ctx, msg.owes)
			}
		}
	}
}

// breakWAL records db's first failed fsync (see storeKept.broken).
func (s *Store) breakWAL(db database, err error) {
	if err == nil || s.kept.broken[db] != nil {
		return
	}
	s.kept.broken[db] = err
	refused := "no message is acked"
	if db == outboxDB {
		refused = "no sends are taken"
	}
	s.log.Error("wal_fsync_failed", "db", dbNames[db], "err", err, "until_restart", refused)
}

// refusal answers a command that needs a durable outbox.db once its fsyncs
// are broken.
func (s *Store) refusal(r storeRequest) any {
	return failed(r, &messages.Error{Status: http.StatusServiceUnavailable, Code: messages.CodeDegraded,
		Detail: "outbox.db could not be synced to disk (" + s.kept.broken[outboxDB].Error() + "): the daemon takes no sends, " +
			"requeues or drops until it is restarted; what it accepted before is still delivered"})
}

// syncBroken names the databases whose fsyncs are broken, with the error,
// for /v1/health ("" when none is).
func (s *Store) syncBroken() string {
	var parts []string
	for db, err := range s.kept.broken {
		if err != nil {
			parts = append(parts, dbNames[db]+": "+err.Error())
		}
	}
	return strings.Join(parts, "; ")
}

// closeSyncers answers what waits for a WAL fsync and stops the syncers.
func (s *Store) closeSyncers() {
	for i, y := range s.durable.syncers {
		if y != nil {
			y.close()
			s.durable.syncers[i] = nil
		}
	}
}

// synced runs the commands that waited for outbox.db's fsync once fewer
// than maxOwedDurable strict batches wait for one.
func (s *Store) synced(ctx actor.Context, owes int) {
	s.durable.owed -= owes
	if s.durable.owed >= maxOwedDurable || len(s.durable.next) == 0 {
		return
	}
	s.batch.queue = append(s.batch.queue, s.durable.next...)
	clear(s.durable.next)
	s.durable.next = s.durable.next[:0]
	s.run(ctx)
}

// deferSync notes an answered accept that is not on disk yet and, under
// batched_50ms, arms the timer that syncs it.
func (s *Store) deferSync(ctx actor.Context) {
	s.durable.unsynced = true
	if s.durable.syncArmed || s.durable.fsync.Mode() != config.FsyncBatched {
		return
	}
	s.durable.syncArmed = true
	workers.SendLater(ctx, config.BatchedSyncDelay, &syncOutbox{})
}

// syncWAL fsyncs outbox.db's WAL if an answered accept waits for it (under
// batched_50ms and off). A failed fsync breaks outbox.db (breakWAL).
func (s *Store) syncWAL() {
	if !s.durable.unsynced {
		return
	}
	s.durable.unsynced = false
	start := time.Now()
	err := s.durable.sync[outboxDB]()
	s.metrics.StoreCommit.WithLabelValues(dbNames[outboxDB], walSync).Observe(time.Since(start).Seconds())
	s.breakWAL(outboxDB, err)
}

// syncOutbox sees to the fsync of a batch that accepted, requeued or
// dropped: under strict its syncer answers those commands once the WAL is
// on disk, or with the error if the fsync fails; under batched_50ms and
// off they are answered now and the fsync deferred (deferSync). Either
// way the rows it claimed go to the dispatchers right after (run): a
// message may reach the broker while its accept's fsync runs, never
// before its commit.
// Should that fsync fail, the caller's 5xx does not say the message was
// not sent: its retry, with the same client_message_id, finds the
// committed row, and the broker's dedupe the sent one.
func (s *Store) syncOutbox(ctx actor.Context, reqs []storeRequest, replies []any) {
	if s.durable.fsync.Mode() != config.FsyncStrict {
		s.deferSync(ctx)
		return
	}
	s.durable.unsynced = false // the syncer's fsync covers the whole WAL
	s.durable.owed++
	s.durable.syncers[outboxDB].owe(reqs, replies)
}

// syncInbox hands the replies of a batch's stores of messages and events to
// the inbox syncer, which answers them once inbox.db's WAL is fsynced (the
// inbox actor sends its client_ack on that answer). The batch's events are
// already published: a local reader sees a message as soon as its commit
// is visible, without waiting for the disk. A power cut before the fsync
// loses the batch's rows and events, never a message: the broker, not
// acked, delivers it again, and a reader may see it twice (the same
// client_message_id); its event ids are not issued again
// (persistence.EventIDGap). The batch's other commands, reads of inbox.db
// included, are answered at once: they do not wait for it.
func (s *Store) syncInbox(reqs []storeRequest, replies []any) {
	for _, r := range reqs {
		if r.cmd.promises(inboxDB) {
			s.durable.syncers[inboxDB].owe(reqs, replies)
			return
		}
	}
}
