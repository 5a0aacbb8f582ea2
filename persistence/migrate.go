package persistence

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

//go:embed migrations
var migrationFiles embed.FS

// OutboxMigrations and InboxMigrations are the embedded migration sets.
var (
	OutboxMigrations = mustSub("migrations/outbox")
	InboxMigrations  = mustSub("migrations/inbox")
)

func mustSub(dir string) fs.FS {
	sub, err := fs.Sub(migrationFiles, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

// Migration is one numbered schema step, from a file NNNN_name.sql.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// ErrSchemaTooNew means the file was written by a newer claudemesh.
var ErrSchemaTooNew = fmt.Errorf("database schema is newer than this binary; install the matching claudemesh version")

// migrate applies, in order and each in its own transaction, every
// migration not recorded in schema_migrations, and returns the highest
// version applied. One below a version already applied is applied too:
// two lines of work numbered their migrations apart (0009 on one, 0010 on
// the other), and a file the second migrated to 0010 must still get 0009
// when it is opened by the code that merged both. Such a migration must
// therefore stand on its own, whatever came after its number.
func migrate(ctx context.Context, db *sqlx.DB, files fs.FS) (int, error) {
	all, err := LoadMigrations(files)
	if err != nil {
		return 0, err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return 0, err
	}
	var done []int
	if err := db.SelectContext(ctx, &done, "SELECT version FROM schema_migrations"); err != nil {
		return 0, err
	}
	applied := make(map[int]bool, len(done))
	current := 0
	for _, v := range done {
		applied[v], current = true, max(current, v)
	}
	latest := 0
	if len(all) > 0 {
		latest = all[len(all)-1].Version
	}
	if current > latest {
		return 0, fmt.Errorf("%w (file has version %d, binary knows %d)", ErrSchemaTooNew, current, latest)
	}
	for _, m := range all {
		if applied[m.Version] {
			continue
		}
		if err := apply(ctx, db, m); err != nil {
			return 0, fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
		}
		current = max(current, m.Version)
	}
	return current, nil
}

func apply(ctx context.Context, db *sqlx.DB, m Migration) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	if strings.Contains(m.SQL, "PRAGMA writable_schema") {
		if err := bumpSchemaVersion(ctx, tx); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
		m.Version, m.Name, time.Now().UnixMilli()); err != nil {
		return err
	}
	return tx.Commit()
}

// bumpSchemaVersion follows a migration that edited sqlite_schema
// directly (the way SQLite documents for changing a CHECK constraint):
// the schema cookie moves on, so every connection parses the schema anew.
func bumpSchemaVersion(ctx context.Context, tx *sqlx.Tx) error {
	var v int64
	if err := tx.GetContext(ctx, &v, "PRAGMA schema_version"); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA schema_version = %d", v+1))
	return err
}

// LoadMigrations reads the NNNN_name.sql files of files, in version order;
// a badly named file or two files with one number is an error.
func LoadMigrations(files fs.FS) ([]Migration, error) {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		return nil, err
	}
	var all []Migration
	for _, name := range names {
		num, rest, ok := strings.Cut(strings.TrimSuffix(path.Base(name), ".sql"), "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil || version <= 0 {
			return nil, fmt.Errorf("migration file %q is not named NNNN_name.sql", name)
		}
		body, err := fs.ReadFile(files, name)
		if err != nil {
			return nil, err
		}
		all = append(all, Migration{Version: version, Name: rest, SQL: string(body)})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Version < all[j].Version })
	for i := 1; i < len(all); i++ {
		if all[i].Version == all[i-1].Version {
			return nil, fmt.Errorf("two migrations numbered %d", all[i].Version)
		}
	}
	return all, nil
}
