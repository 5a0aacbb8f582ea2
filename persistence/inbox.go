package persistence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
)

// OpenInbox opens inbox.db. The inbox is a cache of broker history, so a
// file that fails its integrity check is renamed to
// inbox.db.corrupt-<unix ms> (with its WAL files) and a fresh one is created
// (spec §4.13 step 3).
func OpenInbox(ctx context.Context, path string, log *slog.Logger) (*DB, error) {
	db, err := Open(ctx, path, InboxMigrations)
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
			return nil, fmt.Errorf("quarantine corrupt inbox: %w", rerr)
		}
	}
	log.Warn("inbox_corruption_recovered", "path", path, "quarantined_as", path+suffix, "err", err)
	return Open(ctx, path, InboxMigrations)
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
