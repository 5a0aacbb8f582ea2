package persistence

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
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
// descriptor would sync nothing that counts. It is opened as a bare
// descriptor, not an *os.File, which would register it with the poller
// and set it back to blocking for its Fd: four system calls more a sync,
// and a sync of outbox.db's log is on every strict answer's path.
func SyncWAL(path string) error {
	fd, err := openLog(path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sync %s: open its log: %w", path, err)
	}
	err = fdatasync(fd)
	_ = syscall.Close(fd) // read-only: its close loses nothing
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// openLog opens a log read-only for its sync, retrying an interrupted
// open as package os does.
func openLog(name string) (int, error) {
	for {
		fd, err := syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}
