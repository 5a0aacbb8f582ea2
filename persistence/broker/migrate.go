package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/persistence"
)

// ErrSchemaTooNew means the database was migrated by a newer claudemesh.
var ErrSchemaTooNew = errors.New("broker database schema is newer than this binary; install the matching claudemesh version")

// migrate applies every embedded migration not recorded in
// schema_migrations, in order, each in its own transaction that first
// takes the dialect's migration lock and re-reads what is recorded, so
// replicas starting together apply each migration once. It returns the
// version: the highest recorded. One below a version already recorded is
// applied too, as the daemon's migrator does (persistence.migrate): two
// lines of work numbered theirs apart (0016 on one, 0017 on the other),
// and a database the second migrated to 0017 must still get 0016 from the
// code that merged both; such a migration must stand on its own, whatever
// came after its number.
func migrate(ctx context.Context, db *sqlx.DB, d *dialect) (int, error) {
	all, err := persistence.LoadMigrations(d.migrations)
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

// migrateStep applies the first migration not recorded, if any.
func migrateStep(ctx context.Context, db *sqlx.DB, d *dialect, all []persistence.Migration) (version int, applied bool, err error) {
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
	var done []int
	if err := tx.SelectContext(ctx, &done, "SELECT version FROM schema_migrations"); err != nil {
		return 0, false, err
	}
	recorded := make(map[int]bool, len(done))
	for _, v := range done {
		recorded[v], version = true, max(version, v)
	}
	latest := 0
	if len(all) > 0 {
		latest = all[len(all)-1].Version
	}
	if version > latest {
		return 0, false, fmt.Errorf("%w (database has version %d, binary knows %d)", ErrSchemaTooNew, version, latest)
	}
	i := slices.IndexFunc(all, func(m persistence.Migration) bool { return !recorded[m.Version] })
	if i < 0 {
		return version, false, nil
	}
	m := all[i]
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return 0, false, fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, d.rewrite("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)"),
		m.Version, m.Name, time.Now().UnixMilli()); err != nil {
		return 0, false, fmt.Errorf("record migration %04d_%s: %w", m.Version, m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, false, fmt.Errorf("commit migration %04d_%s: %w", m.Version, m.Name, err)
	}
	return max(version, m.Version), true, nil
}
