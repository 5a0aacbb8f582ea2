package persistence

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// SyncWAL makes every transaction committed so far durable by fsyncing the
// write-ahead log (what a synchronous=FULL commit does for itself).
func (d *DB) SyncWAL() error { return SyncWAL(d.path) }

// SyncWAL fsyncs the write-ahead log of the SQLite file at path, making
// every transaction committed to it so far durable. Whatever is no longer
// in the WAL was checkpointed, and SQLite syncs the database file before
// it reuses the log. No WAL file means nothing is waiting for a sync.
//
// It is an fdatasync, as SQLite's own syncs are where the platform has
// one: the log's frames and its size, not its times. Once SQLite reuses
// the log from its start, a commit overwrites frames in place and changes
// only the file's mtime, which an fsync would also write out each time
// the clock has moved on since the last.
//
// The log is opened for each sync rather than kept open: SQLite deletes
// it when its last connection closes, and an fsync of a deleted file's
// descriptor would sync nothing that counts.
func SyncWAL(path string) error {
	f, err := os.Open(path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	defer f.Close()
	if err := fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}
