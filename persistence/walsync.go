package persistence

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// SyncWAL makes every transaction committed so far durable by fsyncing the
// write-ahead log (what a synchronous=FULL commit does for itself).
// Whatever is no longer in the WAL was checkpointed, and SQLite syncs the
// database file before it reuses the log. No WAL file means nothing is
// waiting for a sync.
func (d *DB) SyncWAL() error {
	f, err := os.Open(d.path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", d.path, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", d.path, err)
	}
	return nil
}
