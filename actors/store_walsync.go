package actors

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
)

// InboxSyncDelay is how long inbox.db's syncer gathers committed batches
// before it fsyncs the WAL. Only the client_acks (and the replies of other
// inbox writes) wait for that fsync — a message's event is published at
// its commit — so waiting costs no reader anything, and it takes most of
// the receiving daemon's fsyncs off a disk that the sending side's
// durable commits need: one fsync every 10 ms under load instead of one
// per push. The broker holds each message until its client_ack, and
// batches the acks for as long (AckDelay).
const InboxSyncDelay = 10 * time.Millisecond

// walSyncer fsyncs one database's WAL on a goroutine of its own, so that
// the store goes on with its next batch while the disk works on the last
// one's (pipelined group commit). The store commits relaxed, does what may
// follow a visible commit at once (claimed rows go to the dispatchers,
// events are published) and hands the syncer the replies that must wait
// for the disk; those are sent after the first fsync that began once
// their batch had committed, in the order the batches committed. One
// fsync covers every batch committed before it began.
//
// Whatever SQLite checkpoints out of the WAL meanwhile is safe: in WAL
// mode a checkpoint syncs the log before it copies and the database file
// before the log is reused.
type walSyncer struct {
	db    database // whose WAL: it owes the replies of db's durable commands
	sync  func() error
	delay time.Duration // gathered before each fsync
	root  *actor.RootContext
	self  *actor.PID // the store, told after each fsync, before its replies go (walSynced)
	// observe times each fsync (cm_daemon_store_commit_seconds).
	observe func(time.Duration)

	mu    sync.Mutex
	owed  []owedReply // replies waiting for the next fsync
	calls int         // owe calls since the last fsync began
	// broken is the first failed fsync's error (the store's record of it
	// at the start, then the loop's goroutine's).
	// From then on no fsync is trusted: the kernel may have dropped pages
	// it could not write, and SQLite's recovery stops at the first bad
	// frame of the WAL, taking every later commit with it. Every reply
	// owed after it is the failure's, until the daemon restarts.
	broken error
	wake   chan struct{}
	stop   chan struct{}
	done   chan struct{}
}

// walSynced is a syncer telling the store, after each fsync and before its
// replies go, how many owe calls the fsync covered and the failure that
// broke the syncer, if one did.
type walSynced struct {
	from   *walSyncer
	owes   int
	broken error
}

// owedReply is one command's reply, held until its batch is on disk.
type owedReply struct {
	req   storeRequest
	reply any
}

// start runs the syncer's goroutine.
func (y *walSyncer) start() *walSyncer {
	y.wake, y.stop, y.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go y.loop()
	return y
}

// owe takes the replies it owes out of a committed batch's replies.
func (y *walSyncer) owe(reqs []storeRequest, replies []any) {
	y.mu.Lock()
	for i, r := range reqs {
		if replies[i] != nil && r.cmd.promises(y.db) {
			if r.sender != nil {
				y.owed = append(y.owed, owedReply{req: r, reply: replies[i]})
			}
			replies[i] = nil
		}
	}
	y.calls++
	y.mu.Unlock()
	select {
	case y.wake <- struct{}{}:
	default: // a wake-up is pending; it takes these too
	}
}

// close syncs what is owed at once, sends it and ends the goroutine.
func (y *walSyncer) close() {
	close(y.stop)
	<-y.done
}

func (y *walSyncer) loop() {
	defer close(y.done)
	var batch []owedReply
	workers.Gather(y.wake, y.stop, y.delay, func() { batch = y.syncOwed(batch) })
}

// syncOwed fsyncs the WAL and sends the replies owed until then; if the
// fsync fails, or one failed before (broken), they are answered with the
// failure instead. batch is the buffer of the previous call, reused.
func (y *walSyncer) syncOwed(batch []owedReply) []owedReply {
	y.mu.Lock()
	batch, y.owed = y.owed, batch[:0]
	owes := y.calls
	y.calls = 0
	y.mu.Unlock()
	if owes == 0 {
		return batch
	}
	err := y.broken
	if err == nil {
		start := time.Now()
		err = y.sync()
		y.observe(time.Since(start))
		y.broken = err
	}
	// First: whoever acts on a reply then finds the store told.
	y.root.Send(y.self, &walSynced{from: y, owes: owes, broken: err})
	for _, o := range batch {
		reply := o.reply
		if err != nil {
			reply = failed(o.req, syncFailure(y.db, err))
		}
		y.root.Send(o.req.sender, reply)
	}
	clear(batch)
	return batch
}
