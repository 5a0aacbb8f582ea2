package broker

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
)

// durability makes a batcher answer a batch only once it is on disk: its
// run commits without an fsync, and sync (the store's SyncWAL) is called
// on a goroutine of its own while the batcher goes on with its next batch
// (pipelined group commit), after gathering batches for delay. failed is
// the result a request gets instead of its own when the fsync fails.
type durability[Res any] struct {
	sync   func() error
	delay  time.Duration
	failed func(Res, error) Res
	// broken is the first failed fsync's error, nil while none failed;
	// the syncer sets it, the broker's /health reads it.
	broken atomic.Pointer[error]
}

// brokenBy is the error of the failed fsync, nil while none failed.
func (d *durability[Res]) brokenBy() error {
	if p := d.broken.Load(); p != nil {
		return *p
	}
	return nil
}

// replySyncer holds a batcher's replies until an fsync that began after
// their batch had committed has returned, then sends them, in the order
// the batches committed. One fsync covers every batch committed before it
// began. So that batches stay large under load, at most one batch commits
// behind a running fsync (mayCommit; without a delay): the requests that
// come meanwhile wait, uncommitted, and the batcher is told to commit them
// together once the fsync has returned — one commit for all, as with an
// fsync in the commit, which the next batch no longer waits for.
//
// After a failed fsync no later one is trusted (the kernel may have
// dropped pages it could not write, and SQLite's recovery stops at the
// first bad frame of the WAL): every reply from then on is the failure's,
// until the broker restarts.
type replySyncer[Res any] struct {
	d    *durability[Res]
	root *actor.RootContext
	log  *slog.Logger

	self *actor.PID // the batcher, told to commit what it held back

	mu      sync.Mutex
	owed    []owedResult[Res]
	behind  int  // batches committed since the last fsync began
	syncing bool // an fsync is running
	held    bool // the batcher held a batch back (mayCommit said no)

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// owedResult is one request's result and who waits for it.
type owedResult[Res any] struct {
	to  *actor.PID
	res Res
}

func startReplySyncer[Res any](d *durability[Res], root *actor.RootContext, self *actor.PID, log *slog.Logger) *replySyncer[Res] {
	y := &replySyncer[Res]{d: d, root: root, self: self, log: log, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go y.loop()
	return y
}

// mayCommit says whether the batcher may commit a batch now: when no fsync
// runs, or one runs and no batch has committed behind it yet. When not,
// the batcher is sent a batchFlush once the running fsync has returned.
// With a delay it always may: the fsyncs are then few whatever the
// commits do, and holding a batch back would only delay its pushes.
func (y *replySyncer[Res]) mayCommit() bool {
	if y.d.delay > 0 {
		return true
	}
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.syncing && y.behind > 0 {
		y.held = true
		return false
	}
	return true
}

// owe takes a committed batch's replies (a nil to answers no one).
func (y *replySyncer[Res]) owe(from []*actor.PID, results []Res) {
	y.mu.Lock()
	y.behind++
	for i, to := range from {
		if to != nil {
			y.owed = append(y.owed, owedResult[Res]{to: to, res: results[i]})
		}
	}
	y.mu.Unlock()
	select {
	case y.wake <- struct{}{}:
	default: // a wake-up is pending; it takes these too
	}
}

// close syncs and sends what is owed, and ends the goroutine.
func (y *replySyncer[Res]) close() {
	close(y.stop)
	<-y.done
}

func (y *replySyncer[Res]) loop() {
	defer close(y.done)
	var batch []owedResult[Res]
	workers.Gather(y.wake, y.stop, y.d.delay, func() { batch = y.syncOwed(batch) })
}

// syncOwed fsyncs and sends the replies owed until then. batch is the
// buffer of the previous call, reused.
func (y *replySyncer[Res]) syncOwed(batch []owedResult[Res]) []owedResult[Res] {
	y.mu.Lock()
	if y.behind == 0 {
		y.mu.Unlock()
		return batch
	}
	batch, y.owed = y.owed, batch[:0]
	y.behind, y.syncing = 0, true
	y.mu.Unlock()
	broken := y.d.brokenBy()
	if broken == nil {
		if broken = y.d.sync(); broken != nil {
			y.d.broken.Store(&broken)
			y.log.Error("wal_fsync_failed", "err", broken,
				"consequence", "every accept is answered failed until the broker restarts")
		}
	}
	y.mu.Lock()
	held := y.held
	y.syncing, y.held = false, false
	y.mu.Unlock()
	if held {
		y.root.Send(y.self, &batchFlush{})
	}
	for _, o := range batch {
		res := o.res
		if broken != nil {
			res = y.d.failed(res, broken)
		}
		y.root.Send(o.to, &batchResult[Res]{res: res})
	}
	clear(batch)
	return batch
}
