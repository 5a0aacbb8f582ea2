// Package persistence owns the daemon's SQLite files: their pragmas, their
// embedded numbered migrations, and every query against them.
//
// Only the store actor calls this package inside a running daemon; nothing
// else opens outbox.db or inbox.db while the daemon runs. Writes happen in
// a Batch: one BEGIN IMMEDIATE transaction for a whole mailbox drain, each
// command that writes with several statements in its own SAVEPOINT so that
// one command's failure leaves its neighbours' work intact (group commit);
// a single statement is atomic by itself. A batch's commit is in the WAL,
// visible and safe from a crash of the process, when it returns
// (synchronous=NORMAL); it is on disk once SyncWAL has fsynced the WAL,
// which the store does, apart from the commits, for the batches whose
// answers promise it.
package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"time"

	"github.com/jmoiron/sqlx"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Tunables.
const (
	DefaultBusyTimeout = 5 * time.Second
	FileMode           = 0o600
	// DefaultReadMmapBytes is how much of the file a read-only pool maps:
	// its connections then share the OS page cache instead of each
	// reading pages into a 2 MB cache of its own (a recall over 100,000
	// memories reads a page per match).
	DefaultReadMmapBytes = 1 << 30
)

// ErrIntegrity means PRAGMA integrity_check did not answer "ok".
var ErrIntegrity = errors.New("database integrity check failed")

// DB is one SQLite file with its migrations applied. It holds a single
// connection: the store actor is its only user, so there is no pool to share.
type DB struct {
	path string
	db   *sqlx.DB
	// The savepoint statements every command runs, prepared once: the
	// driver would otherwise parse them for every command.
	savepoint, release, rollbackTo *sqlx.Stmt
	// version is the schema version after migrations.
	version int
}

// Open creates (mode 0600) or opens the SQLite file at path, sets the
// pragmas, checks that WAL took effect and applies the migrations in dir of
// migrations (files NNNN_name.sql).
func Open(ctx context.Context, path string, migrations fs.FS) (*DB, error) {
	db, err := OpenSQLite(ctx, path, 0)
	if err != nil {
		return nil, err
	}
	d := &DB{path: path, db: db}
	if d.version, err = migrate(ctx, db, migrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	// The migrations ran with synchronous=FULL; the batches' commits skip
	// the fsync, which SyncWAL does apart. (A connection the pool replaced
	// would start FULL again: an fsync more, never one less.)
	if _, err := db.ExecContext(ctx, "PRAGMA synchronous = NORMAL"); err != nil {
		db.Close()
		return nil, fmt.Errorf("set synchronous on %s: %w", path, err)
	}
	for _, st := range []struct {
		to  **sqlx.Stmt
		sql string
	}{{&d.savepoint, "SAVEPOINT cmd"}, {&d.release, "RELEASE cmd"}, {&d.rollbackTo, "ROLLBACK TO cmd"}} {
		if *st.to, err = db.PreparexContext(ctx, st.sql); err != nil {
			d.Close()
			return nil, fmt.Errorf("prepare %q: %w", st.sql, err)
		}
	}
	return d, nil
}

// OpenSQLite opens the SQLite file at path with WAL, synchronous=FULL, a
// busy timeout, foreign keys and an in-memory statement journal (savepoints
// journal the pages they change), and checks that WAL took effect. With
// readConns 0 it is the writer: the file is created with FileMode, the pool
// holds one connection and transactions BEGIN IMMEDIATE. Otherwise it is a
// query-only pool of readConns connections over an existing file, which
// maps up to DefaultReadMmapBytes of it.
func OpenSQLite(ctx context.Context, path string, readConns int) (*sqlx.DB, error) {
	q := url.Values{}
	// The busy timeout first: switching a new file to WAL takes a lock that
	// another process creating it too may hold (hook receivers racing).
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", DefaultBusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Add("_pragma", "temp_store(MEMORY)")
	conns := readConns
	if readConns > 0 {
		q.Add("_pragma", "query_only(ON)")
		q.Add("_pragma", fmt.Sprintf("mmap_size(%d)", DefaultReadMmapBytes))
	} else {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, FileMode)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		f.Close()
		q.Set("_txlock", "immediate")
		conns = 1
	}
	db, err := sqlx.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxLifetime(0)
	var mode string
	if err := db.GetContext(ctx, &mode, "PRAGMA journal_mode"); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if mode != "wal" {
		db.Close()
		return nil, fmt.Errorf("open %s: journal_mode is %q, want wal", path, mode)
	}
	return db, nil
}

// Path is the file this DB was opened from.
func (d *DB) Path() string { return d.path }

// SchemaVersion is the highest migration applied.
func (d *DB) SchemaVersion() int { return d.version }

// Close closes the database.
func (d *DB) Close() error {
	for _, st := range []*sqlx.Stmt{d.savepoint, d.release, d.rollbackTo} {
		if st != nil {
			st.Close()
		}
	}
	return d.db.Close()
}

// IntegrityCheck runs PRAGMA integrity_check.
func (d *DB) IntegrityCheck(ctx context.Context) error {
	var rows []string
	if err := d.db.SelectContext(ctx, &rows, "PRAGMA integrity_check"); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrIntegrity, d.path, err)
	}
	if len(rows) != 1 || rows[0] != "ok" {
		return fmt.Errorf("%w: %s: %v", ErrIntegrity, d.path, rows)
	}
	return nil
}

// Batch is one write transaction shared by many commands.
type Batch struct {
	tx *Tx
	db *DB
}

// Tx is a batch's transaction. Prepared gives the transaction's instance of
// a statement prepared on the database, made once per transaction: the
// batch's commands run the same few statements many times.
type Tx struct {
	*sqlx.Tx
	prepared map[*sqlx.Stmt]*sqlx.Stmt
}

// Prepared is s bound to the transaction.
func (t *Tx) Prepared(s *sqlx.Stmt) *sqlx.Stmt {
	if st, ok := t.prepared[s]; ok {
		return st
	}
	if t.prepared == nil {
		t.prepared = make(map[*sqlx.Stmt]*sqlx.Stmt, 8)
	}
	st := t.Tx.Stmtx(s)
	t.prepared[s] = st
	return st
}

// affected is the number of rows the statement that returned res and err
// changed, or its error.
func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Begin starts a batch with BEGIN IMMEDIATE, taking the write lock up front.
// Its commit is not fsynced (see SyncWAL).
func (d *DB) Begin(ctx context.Context) (*Batch, error) {
	tx, err := d.db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin %s: %w", d.path, err)
	}
	return &Batch{tx: &Tx{Tx: tx}, db: d}, nil
}

// Tx is the batch's transaction, for a command that writes with a single
// statement (atomic by itself: a failing statement undoes its own changes
// and leaves the rest of the batch untouched) or only reads.
func (b *Batch) Tx() *Tx { return b.tx }

// Do runs fn inside a savepoint: if fn fails, its writes are rolled back and
// the rest of the batch is untouched.
func (b *Batch) Do(fn func(tx *Tx) error) error {
	if _, err := b.tx.Prepared(b.db.savepoint).Exec(); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	if err := fn(b.tx); err != nil {
		if _, rbErr := b.tx.Prepared(b.db.rollbackTo).Exec(); rbErr != nil {
			return errors.Join(err, fmt.Errorf("rollback to savepoint: %w", rbErr))
		}
		if _, rbErr := b.tx.Prepared(b.db.release).Exec(); rbErr != nil {
			return errors.Join(err, fmt.Errorf("release savepoint: %w", rbErr))
		}
		return err
	}
	if _, err := b.tx.Prepared(b.db.release).Exec(); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}

// Commit commits the batch; on failure nothing of it is stored.
func (b *Batch) Commit() error { return b.tx.Commit() }

// Rollback abandons the batch. A failed rollback leaves nothing to do:
// database/sql discards the connection.
func (b *Batch) Rollback() { _ = b.tx.Rollback() }
