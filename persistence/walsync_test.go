package persistence

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// outboxWithLog opens an outbox in a fresh directory and commits one
// relaxed transaction to it, so that its WAL exists.
func outboxWithLog(tb testing.TB) *Outbox {
	tb.Helper()
	o, err := OpenOutbox(context.Background(), filepath.Join(tb.TempDir(), "outbox.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { o.Close() })
	b, err := o.Begin(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := b.tx.Exec("CREATE TABLE t (x)"); err != nil {
		tb.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		tb.Fatal(err)
	}
	return o
}

// TestSyncWAL: the sync of a relaxed commit succeeds with the WAL present,
// and with no WAL file there is nothing to sync.
func TestSyncWAL(t *testing.T) {
	o := outboxWithLog(t)
	if _, err := os.Stat(o.Path() + "-wal"); err != nil {
		t.Fatalf("no WAL after a commit: %v", err)
	}
	if err := o.SyncWAL(); err != nil {
		t.Fatalf("SyncWAL: %v", err)
	}
	gone := &DB{path: t.TempDir() + "/never.db"}
	if err := gone.SyncWAL(); err != nil {
		t.Fatalf("SyncWAL without a WAL file: %v", err)
	}
}

// TestSyncWALClosesItsLog: each sync closes the descriptor it opened.
func TestSyncWALClosesItsLog(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts descriptors in /proc/self/fd")
	}
	o := outboxWithLog(t)
	open := func() int {
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(fds)
	}
	before := open()
	for range 100 {
		if err := o.SyncWAL(); err != nil {
			t.Fatal(err)
		}
	}
	if after := open(); after != before {
		t.Fatalf("%d descriptors open after 100 syncs, %d before", after, before)
	}
}

// BenchmarkSyncWAL is one sync of a log with nothing new in it: the cost
// of a sync beside the disk's, which every strict answer pays once.
//
//	go test -run='^$' -bench=BenchmarkSyncWAL -count=5 ./persistence/
func BenchmarkSyncWAL(b *testing.B) {
	o := outboxWithLog(b)
	for b.Loop() {
		if err := o.SyncWAL(); err != nil {
			b.Fatal(err)
		}
	}
}
