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
	// broken is set at the first failed fsync (the broker's /health
	// reports it).
	broken atomic.Bool
}

// replySyncer holds a batcher's replies until an fsync that began after
// their batch had committed has returned, then sends them, in the order
// the batches committed. One fsync covers every batch committed before it
// began.
//
// After a failed fsync no later one is trusted (the kernel may have
// dropped pages it could not write, and SQLite's recovery stops at the
// first bad frame of the WAL): every reply from then on is the failure's,
// until the broker restarts.
type replySyncer[Res any] struct {
	d    *durability[Res]
	root *actor.RootContext
	log  *slog.Logger

	mu     sync.Mutex
	owed   []owedResult[Res]
	broken error

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// owedResult is one request's result and who waits for it.
type owedResult[Res any] struct {
	to  *actor.PID
	res Res
}

func startReplySyncer[Res any](d *durability[Res], root *actor.RootContext, log *slog.Logger) *replySyncer[Res] {
	y := &replySyncer[Res]{d: d, root: root, log: log, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go y.loop()
	return y
}

// owe takes a committed batch's replies (a nil to answers no one).
func (y *replySyncer[Res]) owe(from []*actor.PID, results []Res) {
	y.mu.Lock()
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
	batch, y.owed = y.owed, batch[:0]
	y.mu.Unlock()
	if len(batch) == 0 {
		return batch
	}
	if y.broken == nil {
		if y.broken = y.d.sync(); y.broken != nil {
			y.d.broken.Store(true)
			y.log.Error("wal_fsync_failed", "err", y.broken,
				"consequence", "every accept is answered failed until the broker restarts")
		}
	}
	for _, o := range batch {
		res := o.res
		if y.broken != nil {
			res = y.d.failed(res, y.broken)
		}
		y.root.Send(o.to, &batchResult[Res]{res: res})
	}
	clear(batch)
	return batch
}
