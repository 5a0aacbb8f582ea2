package persistence

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/messages"
)

// HooksMigrations is the embedded migration set of hooks.db.
var HooksMigrations = mustSub("migrations/hooks")

// HooksRetention is how long delivered hook rows are kept (spec: pruned
// after 7 days).
const HooksRetention = 7 * 24 * time.Hour

// Hooks is hooks.db, the agent-hook outbox, as the daemon's store uses it:
// the worker's claims and outcomes, the counts, pruning. The receivers
// insert through package hookoutbox, beside the daemon.
type Hooks struct {
	*DB
	claim     *sqlx.Stmt
	delivered *sqlx.Stmt
	noted     *sqlx.Stmt
	released  *sqlx.Stmt
	retry     *sqlx.Stmt
}

// OpenHooks opens hooks.db, creating it (and its migrations) if needed.
// A file that fails its integrity check is renamed to
// hooks.db.corrupt-<unix ms> and a fresh one created, as inbox.db is:
// losing undelivered hook events costs presence updates, while refusing
// to start would cost every message.
func OpenHooks(ctx context.Context, path string, log *slog.Logger) (*Hooks, error) {
	unlock, err := lockHooksCreation(path)
	if err != nil {
		return nil, err
	}
	db, err := openRecovering(ctx, path, HooksMigrations, "hooks", log)
	unlock()
	if err != nil {
		return nil, err
	}
	return prepareHooks(ctx, db)
}

// CreateHooks creates hooks.db with its schema (mode 0600) and closes it:
// what a receiver does when it finds no hook_outbox table.
func CreateHooks(ctx context.Context, path string) error {
	unlock, err := lockHooksCreation(path)
	if err != nil {
		return err
	}
	defer unlock()
	db, err := Open(ctx, path, HooksMigrations)
	if err != nil {
		return err
	}
	return db.Close()
}

// lockHooksCreation takes hooks.db.lock beside path (an flock, held only
// while hooks.db is opened to be created or migrated): the first hook
// receivers of a machine, and a daemon starting, may all find no hooks.db
// at once, and SQLite's switch of a new file to WAL does not wait for
// another process doing the same (it fails "database is locked"). In
// turns, one creates it and the others find it made. The kernel releases
// the lock of a process that dies; one that holds it stopped (a
// suspended agent's receiver) is waited for DefaultBusyTimeout at most,
// and then creating goes on without the turn, as it did before the lock.
func lockHooksCreation(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return nil, fmt.Errorf("open %s.lock: %w", path, err)
	}
	deadline := time.Now().Add(DefaultBusyTimeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return func() { f.Close() }, nil // closing the file releases the lock
		case !errors.Is(err, syscall.EWOULDBLOCK):
			f.Close()
			return nil, fmt.Errorf("lock %s.lock: %w", path, err)
		case time.Now().After(deadline):
			f.Close()
			return func() {}, nil
		}
		time.Sleep(wait) // another process creates it: milliseconds
	}
}

func prepareHooks(ctx context.Context, db *DB) (*Hooks, error) {
	h := &Hooks{DB: db}
	for _, st := range []struct {
		to  **sqlx.Stmt
		sql string
	}{{&h.claim, claimHooksSQL}, {&h.delivered, deliveredHooksSQL}, {&h.noted, notedHooksSQL},
		{&h.released, releasedHooksSQL}, {&h.retry, retryHookSQL}} {
		var err error
		if *st.to, err = db.db.PreparexContext(ctx, st.sql); err != nil {
			h.Close()
			return nil, fmt.Errorf("prepare hooks.db statements: %w", err)
		}
	}
	return h, nil
}

// Close releases the statements and the database.
func (h *Hooks) Close() error {
	var errs []error
	for _, st := range []*sqlx.Stmt{h.claim, h.delivered, h.noted, h.released, h.retry} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(append(errs, h.DB.Close())...)
}

// claimHooksSQL claims, in one statement, up to :limit due rows oldest
// first: not delivered, next_attempt_at come, unlocked or locked before
// the cutoff (stale), of a session not excluded, and not behind an older
// row of their session that waits for its retry. The update's own
// condition on locked_at is the spec's conditional claim. RETURNING's
// order is not the select's: Claim sorts.
const claimHooksSQL = `UPDATE hook_outbox SET locked_at = :now
 WHERE id IN (
   SELECT h.id FROM hook_outbox h
    WHERE h.delivered_at IS NULL AND h.next_attempt_at <= :now
      AND (h.locked_at IS NULL OR h.locked_at < :cutoff)
      AND h.session_id NOT IN (SELECT value FROM json_each(:exclude))
      AND NOT EXISTS (SELECT 1 FROM hook_outbox o
            WHERE o.session_id = h.session_id AND o.delivered_at IS NULL AND o.attempt_count > 0
              AND o.next_attempt_at > :now
              AND (o.created_at < h.created_at OR o.created_at = h.created_at AND o.id < h.id))
    ORDER BY h.created_at, h.id LIMIT :limit)
   AND delivered_at IS NULL AND (locked_at IS NULL OR locked_at < :cutoff)
 RETURNING id, session_id, agent, event_type, payload, created_at, attempt_count`

// The outcomes, a statement each for many rows: deliveredHooksSQL marks
// the rows of a JSON array of ids handled; notedHooksSQL marks delivered
// the rows of a JSON array of {"i": id, "k": outcome, "e": error or
// note}; releasedHooksSQL frees the rows of an array of ids;
// retryHookSQL schedules one row's retry. A row already delivered is
// left as it is (a stale claim's late outcome).
const (
	deliveredHooksSQL = `UPDATE hook_outbox SET delivered_at = ?, outcome = 'delivered', locked_at = NULL
 WHERE id IN (SELECT value FROM json_each(?)) AND delivered_at IS NULL`
	notedHooksSQL = `UPDATE hook_outbox SET delivered_at = ?1, outcome = o.value ->> 'k', last_error = o.value ->> 'e', locked_at = NULL
 FROM json_each(?2) AS o WHERE hook_outbox.id = o.value ->> 'i' AND hook_outbox.delivered_at IS NULL`
	releasedHooksSQL = `UPDATE hook_outbox SET locked_at = NULL
 WHERE id IN (SELECT value FROM json_each(?)) AND delivered_at IS NULL`
	retryHookSQL = `UPDATE hook_outbox SET attempt_count = attempt_count + 1, last_error = ?, next_attempt_at = ?, locked_at = NULL
 WHERE id = ? AND delivered_at IS NULL`
)

// notedOutcome is an outcome as notedHooksSQL reads it.
type notedOutcome struct {
	ID   int64  `json:"i"`
	Kind string `json:"k"`
	Note string `json:"e"`
}

// Claim runs a worker's claim in the batch's transaction.
// With Recover, the sessions a previous worker holds a fresh lock in are
// found first and left out of this claim too: a later row of theirs must
// not be handled before the locked one.
func (h *Hooks) Claim(tx *Tx, c *messages.ClaimHooks) (*messages.HooksClaimed, error) {
	out := &messages.HooksClaimed{}
	skip := slices.Clone(c.Exclude)
	if c.Recover {
		var err error
		if out.Locked, err = h.locked(tx, c.Cutoff); err != nil {
			return nil, err
		}
		for s := range out.Locked {
			skip = append(skip, s)
		}
	}
	exclude, err := json.Marshal(skip)
	if err != nil {
		return nil, err
	}
	if skip == nil {
		exclude = []byte("[]")
	}
	rows, err := tx.Prepared(h.claim).Query(sql.Named("now", c.Now), sql.Named("cutoff", c.Cutoff),
		sql.Named("exclude", string(exclude)), sql.Named("limit", c.Limit))
	if err != nil {
		return nil, fmt.Errorf("claim hook rows: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r messages.HookRow
		var payload string
		if err := rows.Scan(&r.ID, &r.SessionID, &r.Agent, &r.EventType, &payload, &r.CreatedAt, &r.Attempts); err != nil {
			return nil, fmt.Errorf("claim hook rows: %w", err)
		}
		r.Payload = []byte(payload)
		out.Rows = append(out.Rows, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim hook rows: %w", err)
	}
	slices.SortFunc(out.Rows, func(a, b messages.HookRow) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// locked maps each session with a row locked at or after cutoff to its
// newest such lock: rows a previous worker claimed.
func (h *Hooks) locked(tx *Tx, cutoff int64) (map[string]int64, error) {
	rows, err := tx.Query(`SELECT session_id, MAX(locked_at) FROM hook_outbox
	  WHERE delivered_at IS NULL AND locked_at >= ? GROUP BY session_id`, cutoff)
	if err != nil {
		return nil, fmt.Errorf("find locked hook rows: %w", err)
	}
	defer rows.Close()
	locked := map[string]int64{}
	for rows.Next() {
		var s string
		var at int64
		if err := rows.Scan(&s, &at); err != nil {
			return nil, err
		}
		locked[s] = at
	}
	return locked, rows.Err()
}

// Finish applies a batch of outcomes, in four statements at most: the
// rows handled, those marked delivered with a note (failed, coalesced,
// evicted), those handed back, and each retry (they are few).
func (h *Hooks) Finish(tx *Tx, m *messages.FinishHooks) (int64, error) {
	var delivered, released []int64
	var noted []notedOutcome
	var n int64
	for _, o := range m.Outcomes {
		switch o.Kind {
		case messages.HookDelivered:
			delivered = append(delivered, o.ID)
		case messages.HookFailed, messages.HookCoalesced, messages.HookEvicted:
			noted = append(noted, notedOutcome{ID: o.ID, Kind: o.Kind, Note: o.Error})
		case messages.HookReleased:
			released = append(released, o.ID)
		case messages.HookRetry:
			c, err := affected(tx.Prepared(h.retry).Exec(o.Error, o.NextAttempt, o.ID))
			if err != nil {
				return n, fmt.Errorf("hook row %d retry: %w", o.ID, err)
			}
			n += c
		default:
			return n, fmt.Errorf("hook row %d: unknown outcome %q", o.ID, o.Kind)
		}
	}
	for _, set := range []struct {
		what string
		stmt *sqlx.Stmt
		list any
		len  int
	}{{"mark hook rows delivered", h.delivered, delivered, len(delivered)}, {"mark hook rows done", h.noted, noted, len(noted)},
		{"release hook rows", h.released, released, len(released)}} {
		if set.len == 0 {
			continue
		}
		list, err := json.Marshal(set.list)
		if err != nil {
			return n, err
		}
		args := []any{m.Now, string(list)}
		if set.stmt == h.released {
			args = args[1:]
		}
		c, err := affected(tx.Prepared(set.stmt).Exec(args...))
		if err != nil {
			return n, fmt.Errorf("%s: %w", set.what, err)
		}
		n += c
	}
	return n, nil
}

// Stats counts the backlog, its oldest row, the rows retrying and those
// given up on; the last error is the newest among the rows not delivered.
func (h *Hooks) Stats(tx *Tx) (*messages.HookCounts, error) {
	c := &messages.HookCounts{}
	var oldest sql.NullInt64
	if err := tx.QueryRow(`SELECT COUNT(*), MIN(created_at) FROM hook_outbox WHERE delivered_at IS NULL`).
		Scan(&c.Backlog, &oldest); err != nil {
		return nil, fmt.Errorf("count hook rows: %w", err)
	}
	c.OldestCreatedAt = oldest.Int64
	var last sql.NullString
	if err := tx.QueryRow(`SELECT COUNT(*), (SELECT last_error FROM hook_outbox WHERE delivered_at IS NULL AND attempt_count > 0
	    ORDER BY next_attempt_at DESC LIMIT 1)
	  FROM hook_outbox WHERE delivered_at IS NULL AND attempt_count > 0`).Scan(&c.Retrying, &last); err != nil {
		return nil, fmt.Errorf("count hook retries: %w", err)
	}
	c.LastError = last.String
	if err := tx.QueryRow(`SELECT COUNT(*) FROM hook_outbox WHERE outcome = 'failed'`).Scan(&c.Failed); err != nil {
		return nil, fmt.Errorf("count failed hook rows: %w", err)
	}
	return c, nil
}

// Prune deletes up to limit rows delivered before before (ms).
func (h *Hooks) Prune(tx *Tx, before int64, limit int) (int64, error) {
	n, err := affected(tx.Exec(`DELETE FROM hook_outbox WHERE id IN (SELECT id FROM hook_outbox
	  WHERE delivered_at IS NOT NULL AND delivered_at < ? ORDER BY delivered_at LIMIT ?)`, before, limit))
	if err != nil {
		return 0, fmt.Errorf("prune hook rows: %w", err)
	}
	return n, nil
}

// ReleaseLocks frees every row a claim holds: at the daemon's stop, once
// its worker is gone, so that the next start need not wait out the lock
// cutoff. (After a crash nothing frees them: the cutoff does.)
func (h *Hooks) ReleaseLocks(ctx context.Context) (int64, error) {
	return affected(h.db.ExecContext(ctx, `UPDATE hook_outbox SET locked_at = NULL WHERE locked_at IS NOT NULL AND delivered_at IS NULL`))
}
