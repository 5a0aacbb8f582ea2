package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// ErrSchemaTooNew means the database was migrated by a newer claudemesh.
var ErrSchemaTooNew = errors.New("broker database schema is newer than this binary; install the matching claudemesh version")

type migration struct {
	version int
	name    string
	sql     string
}

// migrate applies every embedded migration newer than the highest one
// recorded in schema_migrations, each in its own transaction that first
// takes the dialect's migration lock and re-reads the version, so replicas
// starting together apply each migration once. It returns the version.
func migrate(ctx context.Context, db *sqlx.DB, d *dialect) (int, error) {
	all, err := loadMigrations(d.migrations)
	if err != nil {
		return 0, err
	}
	for {
		version, applied, err := migrateStep(ctx, db, d, all)
		if err != nil || !applied {
			return version, err
		}
	}
}

// migrateStep applies the next pending migration, if any.
func migrateStep(ctx context.Context, db *sqlx.DB, d *dialect, all []migration) (version int, applied bool, err error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, false, err
	}
	defer tx.Rollback()
	if d.lockMigrations != "" {
		if _, err := tx.ExecContext(ctx, d.lockMigrations); err != nil {
			return 0, false, fmt.Errorf("lock migrations: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`); err != nil {
		return 0, false, err
	}
	if err := tx.GetContext(ctx, &version, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations"); err != nil {
		return 0, false, err
	}
	latest := 0
	if len(all) > 0 {
		latest = all[len(all)-1].version
	}
	if version > latest {
		return 0, false, fmt.Errorf("%w (database has version %d, binary knows %d)", ErrSchemaTooNew, version, latest)
	}
	i := sort.Search(len(all), func(i int) bool { return all[i].version > version })
	if i == len(all) {
		return version, false, nil
	}
	m := all[i]
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return 0, false, fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
	}
	if _, err := tx.ExecContext(ctx, d.rewrite("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)"),
		m.version, m.name, time.Now().UnixMilli()); err != nil {
		return 0, false, fmt.Errorf("record migration %04d_%s: %w", m.version, m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, false, fmt.Errorf("commit migration %04d_%s: %w", m.version, m.name, err)
	}
	return m.version, true, nil
}

func loadMigrations(files fs.FS) ([]migration, error) {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		return nil, err
	}
	var all []migration
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
		all = append(all, migration{version: version, name: rest, sql: string(body)})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].version < all[j].version })
	for i := 1; i < len(all); i++ {
		if all[i].version == all[i-1].version {
			return nil, fmt.Errorf("two migrations numbered %d", all[i].version)
		}
	}
	return all, nil
}
