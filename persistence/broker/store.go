// Package broker owns the broker's storage: meshes, members, invites, the
// client_message_id dedupe table (spec §4.9.1), messages, their history and
// the per-recipient delivery queue. One Store type serves two backends:
// embedded SQLite (one broker node) and PostgreSQL (several broker replicas
// on one database). The SQL is written once; the few dialect differences
// (placeholders, locking clauses, the JSON-array table function, how a time
// is stored) live in the dialect value.
//
// The accept path follows spec §4.9.4: AcceptBatch runs one transaction for
// many sends (group commit) and writes, per created send, the dedupe row,
// the message row, the history row and the delivery-queue rows together or
// not at all. "Dedupe row exists" ⇔ "accept committed": nothing in this
// package leaves a dedupe row behind on a rejection. A batch runs set-wise
// (a few multi-row statements for all its sends); when a statement fails,
// it runs again with one SAVEPOINT per send, so that only the culprit fails.
//
// Decisions the spec leaves open:
//   - Times are time.Time in the Go API, truncated to milliseconds. SQLite
//     stores Unix milliseconds (INTEGER), PostgreSQL TIMESTAMPTZ. The clock is
//     the broker's (Options.Now), not the database's.
//   - broker_message_id and history_id are ULIDs (TEXT). A message's id
//     carries its created_at (retention finds old messages by id); a
//     history_id sorts by accept time and is an opaque token for the daemon.
//   - Invites are v1 signed tokens (messages.InvitePayload) signed by a
//     per-mesh owner key the store makes at the mesh's first invite and
//     keeps (mesh_owner_key); only a token's SHA-256 is stored. Two
//     invites alike made in one second would be one token (ed25519 is
//     deterministic): the later expires a second earlier.
//   - Delivery rows stay after their ack (delivered_at set) until their
//     message is pruned; a lease is the claimer's promise to push, and an
//     expired lease makes the row claimable again.
//   - A client_message_id belongs to its sender: the dedupe key is
//     (mesh_id, sender_pubkey, client_message_id), where sender_pubkey is
//     the key the push carries as senderPubkey (a member key, or a session
//     key), not the spec's (mesh_id, client_message_id): two senders of
//     one mesh may use one id. A row from before migration 0005 whose
//     message was already gone has an empty sender_pubkey and answers its id
//     for every sender of the mesh, as all rows did then.
//   - Redeeming an invite for a pubkey that is already an active member of
//     the mesh returns that membership and does not consume a use (a retried
//     `claudemesh join` must not fail), as upstream's broker does; a revoked
//     pubkey is refused.
//
// This package must never push, authenticate or rate-limit: the WebSocket
// layer does that with what it reads here. It never logs message contents
// or invite tokens.
package broker

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	"github.com/jmoiron/sqlx"
	"github.com/oklog/ulid/v2"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/claudemesh/claudemesh-go/persistence"
)

// Tunables.
const (
	// FileName is the SQLite database inside Options.Dir.
	FileName = "broker.db"
	// DefaultReadConns is the size of the SQLite read-only pool; writes
	// always go through one connection.
	DefaultReadConns = 4
	// DefaultPostgresConns bounds the PostgreSQL pool.
	DefaultPostgresConns = 16
)

// Options says which backend to open. Exactly one of Dir and DatabaseURL is
// set.
type Options struct {
	Dir         string // SQLite: directory holding broker.db (created 0700)
	DatabaseURL string // PostgreSQL: postgres://… connection URL
	Log         *slog.Logger
	// Now is the clock for every stored time; nil means time.Now.
	Now func() time.Time
	// MaxConns bounds the PostgreSQL pool; 0 means DefaultPostgresConns.
	MaxConns int
	// ListenCheck is how long a PostgreSQL LISTEN connection may be quiet
	// before it is probed, and how long a probe or a connect of it may
	// take; 0 means DefaultListenCheck.
	ListenCheck time.Duration
	// Serve says a broker will serve the store (`broker up`, a daemon's
	// embedded broker), not a command that provisions it. On SQLite it
	// takes the directory's exclusive flock for the store's life:
	// a second broker on the same file would hold its own connections
	// and presence, and split the mesh between the two (ErrServed).
	Serve bool
}

// ErrServed means another broker serves the SQLite directory already.
var ErrServed = errors.New("another broker serves this SQLite store already")

// Store is the broker's database. It is safe for concurrent use.
type Store struct {
	d       *dialect
	db      *sqlx.DB // writes; on SQLite the single writer connection
	rdb     *sqlx.DB // reads; on SQLite a read-only pool, else db
	path    string   // SQLite: the database file
	now     func() time.Time
	log     *slog.Logger
	version int
	lookup  *sqlx.Stmt // the B0 read, on rdb
	stmts   *stmtCache // SQLite: the write path's statements
	// listenConfig (PostgreSQL) connects the LISTEN connections, which
	// listenCheck bounds (listen.go).
	listenConfig *pgx.ConnConfig
	listenCheck  time.Duration
	// unknownSenders is set when, at open, the dedupe table held rows of
	// unknown sender (from before migration 0005, their message gone):
	// while it is, the accept looks for an id's such row before claiming
	// it. No such row is written any more, so a store that found none
	// never needs to look.
	unknownSenders bool
	// dedupeOf caches each mesh's dedupe settings (id → meshDedupe) for
	// the accept path: a mesh row is never changed after its creation, so
	// a cached one never goes stale. A mesh not found is not cached.
	dedupeOf sync.Map
	// messageIDs is the entropy of message ids (claim): monotonic within
	// a millisecond, so that the ids of one millisecond's accepts keep
	// their order.
	messageIDs io.Reader
	// served is the SQLite directory, flocked while a broker serves it
	// (Options.Serve); nil otherwise.
	served *os.File
}

// Open opens (and on SQLite creates) the database, applies the embedded
// migrations and prepares the hot-path statements.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if (opts.Dir == "") == (opts.DatabaseURL == "") {
		return nil, errors.New("broker store: set exactly one of Dir and DatabaseURL")
	}
	s := &Store{now: opts.Now, log: opts.Log,
		messageIDs: &ulid.LockedMonotonicReader{MonotonicReader: ulid.Monotonic(crand.Reader, 0)}}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	var err error
	if opts.Dir != "" {
		err = s.openSQLite(ctx, opts.Dir, opts.Serve)
	} else {
		s.listenCheck = cmp.Or(opts.ListenCheck, DefaultListenCheck)
		err = s.openPostgres(ctx, opts.DatabaseURL, opts.MaxConns)
	}
	if err != nil {
		s.closeDBs() // what was opened before the failure, the serving lock too
		return nil, err
	}
	if s.version, err = migrate(ctx, s.db, s.d); err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("migrate broker store: %w", err)
	}
	if err = s.fillNameKeys(ctx); err != nil {
		s.closeDBs()
		return nil, err
	}
	s.log.Info("broker_store_open", "backend", s.d.name, "schema_version", s.version)
	if s.d.name == sqliteName {
		if s.rdb, err = persistence.OpenSQLite(ctx, filepath.Join(opts.Dir, FileName), DefaultReadConns); err != nil {
			s.closeDBs()
			return nil, err
		}
	}
	if err = s.db.GetContext(ctx, &s.unknownSenders,
		"SELECT EXISTS (SELECT 1 FROM client_message_dedupe WHERE sender_pubkey = '')"); err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("look for dedupe rows of unknown sender: %w", err)
	}
	if s.lookup, err = s.rdb.PreparexContext(ctx, s.d.rewrite(dedupeSelect+
		" WHERE d.mesh_id = ? AND d.sender_pubkey IN (?, '') AND d.client_message_id = ?")); err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("prepare the dedupe lookup: %w", err)
	}
	return s, nil
}

func (s *Store) openSQLite(ctx context.Context, dir string, serve bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create broker dir: %w", err)
	}
	if serve {
		if err := s.lockServed(dir); err != nil {
			return err
		}
	}
	var err error
	s.path = filepath.Join(dir, FileName)
	if s.db, err = persistence.OpenSQLite(ctx, s.path, 0); err != nil {
		return err
	}
	s.d, s.rdb, s.stmts = sqliteDialect, s.db, newStmtCache()
	return nil
}

func (s *Store) openPostgres(ctx context.Context, databaseURL string, maxConns int) error {
	var err error
	if s.listenConfig, err = listenConfig(databaseURL); err != nil {
		return fmt.Errorf("open postgres: %w", err)
	}
	db, err := sqlx.Open("pgx", databaseURL)
	if err != nil {
		return fmt.Errorf("open postgres: %w", err)
	}
	if maxConns <= 0 {
		maxConns = DefaultPostgresConns
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return fmt.Errorf("connect postgres: %w", err)
	}
	s.d, s.db, s.rdb = postgresDialect, db, db
	return nil
}

// Backend is "sqlite" or "postgres".
func (s *Store) Backend() string { return s.d.name }

// SchemaVersion is the highest migration applied.
func (s *Store) SchemaVersion() int { return s.version }

// SyncWAL makes every accept committed so far durable: on SQLite it
// fsyncs the write-ahead log (AcceptBatch commits without one); on
// PostgreSQL a commit is durable when it returns, and there is nothing to
// do.
func (s *Store) SyncWAL() error {
	if s.d.name != sqliteName {
		return nil
	}
	return persistence.SyncWAL(s.path)
}

// Close releases the statements and the database handles.
func (s *Store) Close() error {
	return errors.Join(s.lookup.Close(), s.closeDBs())
}

// lockServed takes dir's exclusive flock for the store's life: the
// directory, not a file in it, whose deletion would free the lock.
func (s *Store) lockServed(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("lock broker dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%w: %s (two brokers on one SQLite file split the mesh between them): stop the other, "+
				"or run several replicas on PostgreSQL", ErrServed, dir)
		}
		return fmt.Errorf("lock broker dir %s: %w", dir, err)
	}
	s.served = f
	return nil
}

func (s *Store) closeDBs() error {
	if s.stmts != nil {
		s.stmts.close()
	}
	var errs []error
	if s.rdb != nil && s.rdb != s.db {
		errs = append(errs, s.rdb.Close())
	}
	if s.db != nil {
		errs = append(errs, s.db.Close())
	}
	if s.served != nil {
		errs = append(errs, s.served.Close()) // drops the flock, once the file is let go
	}
	return errors.Join(errs...)
}

// clock is the store's now, truncated to the millisecond both backends keep.
func (s *Store) clock() time.Time { return time.UnixMilli(s.now().UnixMilli()).UTC() }

// beginWrite starts a write transaction (BEGIN IMMEDIATE on SQLite).
func (s *Store) beginWrite(ctx context.Context) (*sqlx.Tx, error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	return tx, nil
}

// beginRelaxed starts a write transaction whose commit skips the fsync on
// SQLite (synchronous=NORMAL for this one transaction): for writes whose
// loss in a power cut only means work done again, such as acks (the
// message is pushed again and the receiver dedupes it). The connection is
// pinned so that no other transaction runs relaxed; done restores FULL
// and releases it, and must be called once the transaction has ended. A
// connection that cannot be restored is discarded. On PostgreSQL this is
// beginWrite.
func (s *Store) beginRelaxed(ctx context.Context) (tx *sqlx.Tx, done func(), err error) {
	if s.d.name != sqliteName {
		tx, err = s.beginWrite(ctx)
		return tx, func() {}, err
	}
	conn, err := s.db.Connx(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("begin: %w", err)
	}
	done = func() {
		if _, err := conn.ExecContext(context.Background(), "PRAGMA synchronous = FULL"); err != nil {
			s.log.Error("restore synchronous=FULL; discarding the connection", "err", err)
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		conn.Close()
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = NORMAL"); err != nil {
		done()
		return nil, nil, fmt.Errorf("begin: %w", err)
	}
	if tx, err = conn.BeginTxx(ctx, nil); err != nil {
		done()
		return nil, nil, fmt.Errorf("begin: %w", err)
	}
	return tx, done, nil
}

// commit commits tx. On failure nothing of it is stored: PostgreSQL ends
// a transaction whose COMMIT failed, and the SQLite driver rolls back one
// that COMMIT left open, so the writer connection comes back clean.
func (s *Store) commit(tx *sqlx.Tx) error {
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// inTx runs fn in one write transaction.
func (s *Store) inTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	defer s.prepareWanted(ctx)
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback() // the error that matters is fn's
		return err
	}
	return s.commit(tx)
}

// dbTime scans a timestamp stored by either backend: INTEGER Unix ms
// (SQLite) or TIMESTAMPTZ (PostgreSQL).
type dbTime time.Time

func (t *dbTime) Scan(v any) error {
	switch x := v.(type) {
	case int64:
		*t = dbTime(time.UnixMilli(x).UTC())
	case time.Time:
		*t = dbTime(x.UTC())
	default:
		return fmt.Errorf("scan time: unexpected %T", v)
	}
	return nil
}

// nullTime scans a nullable timestamp into a *time.Time.
type nullTime struct{ p **time.Time }

func (n nullTime) Scan(v any) error {
	if v == nil {
		*n.p = nil
		return nil
	}
	var t dbTime
	if err := t.Scan(v); err != nil {
		return err
	}
	tt := time.Time(t)
	*n.p = &tt
	return nil
}

// nullString stores "" as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// jsonArray renders strings as a JSON array for the EACH(?) table function.
func jsonArray(items []string) string {
	if items == nil {
		return "[]"
	}
	b, _ := json.Marshal(items) // a []string always marshals
	return string(b)
}
