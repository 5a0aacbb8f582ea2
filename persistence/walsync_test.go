package persistence

import (
	"context"
	"os"
	"testing"
)

// TestSyncWAL: the sync of a relaxed commit succeeds with the WAL present,
// and with no WAL file there is nothing to sync.
func TestSyncWAL(t *testing.T) {
	o := openTestOutbox(t)
	b, err := o.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.tx.Exec("CREATE TABLE t (x)"); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
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
