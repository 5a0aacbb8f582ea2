package actors

import (
	"sync/atomic"
	"time"
)

// Faults are failures that tests inject into a running daemon. Production
// code never makes one: Deps.Faults is nil there, and every hook below
// falls back to the real thing. (The `claudemesh` binary reads them from
// the environment only when built with `-tags faults`, as the isolation
// test builds it.)
type Faults struct {
	// InboxPanic names a mesh whose inbox actor panics at its next message
	// push, once: the test that a panic restarts that mesh's subtree alone.
	// The push is not acked, so the broker delivers it again.
	InboxPanic string
	// InboxPanicked says the panic has happened; it survives the restart
	// it causes.
	InboxPanicked atomic.Bool
	// SyncOutboxWAL and SyncInboxWAL stand in for the fsync of each
	// database's WAL (nil: DB.SyncWAL), to make it fail or wait.
	SyncOutboxWAL, SyncInboxWAL func() error
	// StorePanic makes the store panic once its next batch has committed,
	// before the batch's hand-offs, once: the test that a batch whose
	// replies a syncer already holds answers each command once.
	StorePanic atomic.Bool
	// HookStall names a hook event type whose handler, its work done,
	// never returns: a hooks worker that dies mid-row once the daemon is
	// killed. HookLockCutoff replaces the worker's 30 s lock cutoff, so
	// that the test of that death need not wait it out.
	HookStall      string
	HookLockCutoff time.Duration
}

// storePanics says whether the store must panic now (once).
func (f *Faults) storePanics() bool {
	return f != nil && f.StorePanic.CompareAndSwap(true, false)
}

// inboxPanics says whether mesh's inbox must panic now (once).
func (f *Faults) inboxPanics(mesh string) bool {
	return f != nil && f.InboxPanic == mesh && f.InboxPanicked.CompareAndSwap(false, true)
}
