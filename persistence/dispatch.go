package persistence

import (
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/claudemesh/claudemesh-go/messages/backoff"
)

// Retry schedule of the outbox (spec §4.6, ARCHITECTURE A14): the first
// retry waits BackoffBase, each further one twice as long, up to BackoffCap;
// the capped delay is then spread by ±BackoffJitter.
const (
	BackoffBase   = 500 * time.Millisecond
	BackoffCap    = 30 * time.Second
	BackoffJitter = 0.25
)

// ReasonMaxAge is the last_error of a row ExpireOld moved to dead (§4.11).
const ReasonMaxAge = "max_age_exceeded"

// ErrStateChanged means an outbox transition did not apply because the row
// is not (or no longer) in the status the transition starts from, or does
// not exist. Nothing was written. The dispatcher treats it as "someone else
// already decided this row" (an operator requeue, an expiry, a duplicate
// answer) and drops its own decision.
var ErrStateChanged = errors.New("outbox row state changed")

// DueRow is one outbox row ClaimDue moved to inflight: what the dispatcher
// needs to transmit it. Attempts already counts the attempt being started.
type DueRow struct {
	ID              string `db:"id"`
	ClientMessageID string `db:"client_message_id"`
	Payload         []byte `db:"payload"`
	Attempts        int    `db:"attempts"`
	EnqueuedAt      int64  `db:"enqueued_at"`
}

// ClaimDue moves up to limit of mesh's pending rows whose next_attempt_at is
// at or before now to inflight, counting one attempt each, and returns them
// oldest first (enqueued_at, then id). The candidates are read in that
// order from the index outbox_queue, so a claim reads about as many rows as
// it takes, whatever the backlog. A limit of zero or less
// claims nothing. Callers expire rows past max age (ExpireOld) first, in the
// same batch, so that no expired row is sent.
func (o *Outbox) ClaimDue(tx *Tx, mesh string, now int64, limit int) ([]DueRow, error) {
	if limit <= 0 {
		return nil, nil
	}
	var rows []DueRow
	if err := tx.Prepared(o.claimDue).Select(&rows, mesh, now, limit); err != nil {
		return nil, fmt.Errorf("claim due outbox rows of mesh %q: %w", mesh, err)
	}
	// RETURNING gives no order guarantee.
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].EnqueuedAt != rows[j].EnqueuedAt {
			return rows[i].EnqueuedAt < rows[j].EnqueuedAt
		}
		return rows[i].ID < rows[j].ID
	})
	return rows, nil
}

// claimDueSQL is one statement: select and transition cannot be separated.
// The limit is written `?3 + 0`: SQLite re-prepares a statement whose bare
// LIMIT parameter changes value, and the limit (the dispatcher's credit)
// changes with nearly every claim. INDEXED BY: the claim must read the
// queue in order, never sort it.
const claimDueSQL = `UPDATE outbox SET status = 'inflight', attempts = attempts + 1
 WHERE id IN (SELECT id FROM outbox INDEXED BY outbox_queue
               WHERE status = 'pending' AND next_attempt_at <= ?2 AND mesh = ?1
               ORDER BY enqueued_at, id LIMIT ?3 + 0)
 RETURNING id, client_message_id, payload, attempts, enqueued_at`

// NextDue returns the earliest next_attempt_at among mesh's pending rows, for
// the dispatcher's timer; ok is false when the mesh has no pending row.
func (o *Outbox) NextDue(tx *Tx, mesh string) (at int64, ok bool, err error) {
	var v sql.NullInt64
	if err := tx.Prepared(o.nextDue).Get(&v, mesh); err != nil {
		return 0, false, fmt.Errorf("next due outbox row of mesh %q: %w", mesh, err)
	}
	return v.Int64, v.Valid, nil
}

const nextDueSQL = `SELECT MIN(next_attempt_at) FROM outbox WHERE status = 'pending' AND mesh = ?`

// MarkDone records the broker's acceptance (201, or 200 duplicate) of an
// inflight row: status done, delivered_at = now, and the broker's ids (an
// empty id is stored as NULL). Any other status gives ErrStateChanged.
func (o *Outbox) MarkDone(tx *Tx, id, brokerMessageID, historyID string, now int64) error {
	res, err := tx.Prepared(o.markDone).Exec(now, brokerMessageID, historyID, id)
	return applied(tx, res, err, id, "mark done", "inflight")
}

const markDoneSQL = `UPDATE outbox SET status = 'done', delivered_at = ?,
	       broker_message_id = NULLIF(?, ''), history_id = NULLIF(?, '')
	 WHERE id = ? AND status = 'inflight'`

// MarkDead records a permanent failure (broker 409 or another permanent
// 4xx) of an inflight or pending row: status dead, last_error = reason,
// dead_at = now. Any other status gives ErrStateChanged.
func (o *Outbox) MarkDead(tx *Tx, id, reason string, now int64) error {
	res, err := tx.Exec(`UPDATE outbox SET status = 'dead', last_error = ?, dead_at = ?
	                      WHERE id = ? AND status IN ('inflight', 'pending')`, reason, now, id)
	return applied(tx, res, err, id, "mark dead", "inflight or pending")
}

// Retry records a transient failure (5xx, timeout, rate limit) of an
// inflight row: back to pending with next_attempt_at = next (see Backoff)
// and last_error = reason. The attempt was counted when it was claimed. Any
// other status gives ErrStateChanged.
func (o *Outbox) Retry(tx *Tx, id, reason string, next int64) error {
	res, err := tx.Exec(`UPDATE outbox SET status = 'pending', next_attempt_at = ?, last_error = ?
	                      WHERE id = ? AND status = 'inflight'`, next, reason, id)
	return applied(tx, res, err, id, "retry", "inflight")
}

// ReleaseMesh returns every inflight row of mesh to pending, due at now,
// without counting another attempt: the connection dropped before the
// broker answered, and the next connection resends (the broker's dedupe
// answers 200 duplicate if the first transmit got through). It returns the
// number of rows released.
func (o *Outbox) ReleaseMesh(tx *Tx, mesh string, now int64) (int64, error) {
	n, err := affected(tx.Exec(`UPDATE outbox SET status = 'pending', next_attempt_at = ?
	                               WHERE status = 'inflight' AND mesh = ?`, now, mesh))
	if err != nil {
		return 0, fmt.Errorf("release inflight outbox rows of mesh %q: %w", mesh, err)
	}
	return n, nil
}

// ExpireOld moves mesh's pending rows enqueued before olderThan (now minus
// the effective max age, §4.11) to dead with last_error "max_age_exceeded"
// and dead_at = now, and returns how many it moved. Inflight rows are left
// to their attempt's answer: a Retry returns them to pending and the next
// ExpireOld takes them; a done answer means they were delivered.
func (o *Outbox) ExpireOld(tx *Tx, mesh string, olderThan, now int64) (int64, error) {
	n, err := affected(tx.Exec(`UPDATE outbox SET status = 'dead', last_error = ?, dead_at = ?
	                               WHERE status = 'pending' AND mesh = ? AND enqueued_at < ?`,
		ReasonMaxAge, now, mesh, olderThan))
	if err != nil {
		return 0, fmt.Errorf("expire outbox rows of mesh %q: %w", mesh, err)
	}
	return n, nil
}

// applied turns the result of a single-row transition into nil, or into
// ErrStateChanged (with the row's actual status) when no row matched.
func applied(tx *Tx, res sql.Result, err error, id, what, from string) error {
	n, err := affected(res, err)
	if err != nil {
		return fmt.Errorf("%s outbox row %s: %w", what, id, err)
	}
	if n == 1 {
		return nil
	}
	var status string
	switch err := tx.Get(&status, "SELECT status FROM outbox WHERE id = ?", id); {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%s outbox row %s: no such row: %w", what, id, ErrStateChanged)
	case err != nil:
		return errors.Join(fmt.Errorf("%s outbox row %s: %w", what, id, ErrStateChanged),
			fmt.Errorf("look up status: %w", err))
	}
	return fmt.Errorf("%s outbox row %s: status is %s, want %s: %w", what, id, status, from, ErrStateChanged)
}

// Backoff is the wait before retry number attempts (1 = the first retry,
// i.e. after one failed attempt; values below 1 count as 1): BackoffBase ×
// 2^(attempts-1), capped at BackoffCap, then multiplied by a factor in
// [1-BackoffJitter, 1+BackoffJitter) drawn from jitter, which returns a
// number in [0, 1) (math/rand/v2.Float64 will do; out-of-range values are
// clamped). A nil jitter means no spread. The jitter applies after the cap
// so that rows at the cap do not retry in lockstep: waits lie in
// [375 ms, 625 ms) for the first retry and [22.5 s, 37.5 s) at the cap.
func Backoff(attempts int, jitter func() float64) time.Duration {
	if jitter == nil {
		return outboxRetry.Delay(attempts, nil)
	}
	return outboxRetry.Delay(attempts, func() float64 { return clampJitter(jitter()) })
}

// outboxRetry is Backoff's schedule.
var outboxRetry = backoff.Schedule{First: BackoffBase, Max: BackoffCap, Jitter: BackoffJitter}

// clampJitter brings a jitter draw into [0, 1), so that a source that
// strays never moves a retry out of its ±BackoffJitter band.
func clampJitter(j float64) float64 {
	switch {
	case math.IsNaN(j) || j < 0:
		return 0
	case j >= 1:
		return 0.999999
	}
	return j
}
