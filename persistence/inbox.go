package persistence

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// OpenInbox opens inbox.db. The inbox is a cache of broker history, so a
// file that fails its integrity check is renamed to
// inbox.db.corrupt-<unix ms> (with its WAL files) and a fresh one is created
// (spec §4.13 step 3). Each open moves the event id sequence on by
// EventIDGap (see there).
func OpenInbox(ctx context.Context, path string, log *slog.Logger) (*DB, error) {
	db, err := openRecovering(ctx, path, InboxMigrations, "inbox", log)
	if err != nil {
		return nil, err
	}
	return skipEventIDs(ctx, db)
}

// openRecovering opens the database at path (its migrations applied) and
// checks its integrity; a file that fails the check, or that SQLite finds
// corrupt, is renamed to <path>.corrupt-<unix ms> with its WAL files,
// logged as <name>_corruption_recovered, and a fresh one created. It is
// for the files whose content the daemon can lose: inbox.db and hooks.db.
func openRecovering(ctx context.Context, path string, migrations fs.FS, name string, log *slog.Logger) (*DB, error) {
	db, err := Open(ctx, path, migrations)
	if err == nil {
		if err = db.IntegrityCheck(ctx); err == nil {
			return db, nil
		}
		db.Close()
	}
	if !errors.Is(err, ErrIntegrity) && !isCorrupt(err) {
		return nil, err
	}
	suffix := fmt.Sprintf(".corrupt-%d", time.Now().UnixMilli())
	for _, ext := range []string{"", "-wal", "-shm"} {
		if rerr := os.Rename(path+ext, path+suffix+ext); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return nil, fmt.Errorf("quarantine corrupt %s: %w", filepath.Base(path), rerr)
		}
	}
	log.Warn(name+"_corruption_recovered", "path", path, "quarantined_as", path+suffix, "err", err)
	return Open(ctx, path, migrations)
}

// EventIDGap is how far the event id sequence jumps each time inbox.db is
// opened after it issued an id. The daemon's store publishes a batch's
// events as soon as its commit is visible and fsyncs the log before it
// acknowledges anything to the broker and before its next batch; a power
// cut in between takes that one batch back, ids included. Starting past
// them means an id a client was shown is never given to another event. It
// is far more than one batch can append. (A log whose very first batch
// was lost has no sequence to move: those few ids can come again.)
const EventIDGap = 4096

// skipEventIDs moves the events table's AUTOINCREMENT sequence, if it has
// one, EventIDGap past the highest id issued, durably, and returns db
// (closed on failure).
func skipEventIDs(ctx context.Context, db *DB) (*DB, error) {
	_, err := db.db.ExecContext(ctx, `UPDATE sqlite_sequence SET seq = seq + ? WHERE name = 'events'`, EventIDGap)
	if err == nil {
		err = db.SyncWAL() // before any event is issued
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("move the event id sequence of %s: %w", db.Path(), err)
	}
	return db, nil
}

// isCorrupt reports SQLite's "file is not a database" and "malformed" errors,
// which Open returns before an integrity check can run.
func isCorrupt(err error) bool {
	msg := err.Error()
	return containsAny(msg, "file is not a database", "malformed", "SQLITE_CORRUPT", "SQLITE_NOTADB")
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
