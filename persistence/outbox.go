package persistence

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Outbox is outbox.db with its prepared hot-path statements.
type Outbox struct {
	*DB
	lookup   *sqlx.Stmt
	insert   *sqlx.Stmt
	claimed  *sqlx.Stmt // insert already inflight (Accept with claim)
	markDone *sqlx.Stmt // the dispatcher's most frequent write
	claimDue *sqlx.Stmt // runs with every batch that makes rows due
	nextDue  *sqlx.Stmt
	// Restored names the audit log's triggers (and view) that the open
	// found missing, changed or foreign and put back (restoreAudit): the
	// daemon logs them.
	Restored []string
}

// OpenOutbox opens outbox.db and checks its integrity: the outbox cannot be
// rebuilt from anywhere else, so a failed check is returned as ErrIntegrity
// and the daemon must not start.
func OpenOutbox(ctx context.Context, path string) (*Outbox, error) {
	db, err := Open(ctx, path, OutboxMigrations)
	if err != nil {
		if isCorrupt(err) {
			return nil, fmt.Errorf("%w: %v", ErrIntegrity, err)
		}
		return nil, err
	}
	if err := db.IntegrityCheck(ctx); err != nil {
		db.Close()
		return nil, err
	}
	o := &Outbox{DB: db}
	if o.Restored, err = o.restoreAudit(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if o.lookup, err = db.db.PreparexContext(ctx,
		`SELECT request_fingerprint, fingerprint_version, status, broker_message_id, history_id, last_error
		   FROM outbox WHERE client_message_id = ? AND mesh = ?`); err != nil {
		db.Close()
		return nil, err
	}
	for _, st := range []struct {
		to  **sqlx.Stmt
		sql string
	}{{&o.insert, fmt.Sprintf(insertSQL, 0, messages.StatusPending)}, {&o.claimed, fmt.Sprintf(insertSQL, 1, messages.StatusInflight)},
		{&o.markDone, markDoneSQL}, {&o.claimDue, claimDueSQL}, {&o.nextDue, nextDueSQL}} {
		if *st.to, err = db.db.PreparexContext(ctx, st.sql); err != nil {
			o.Close()
			return nil, err
		}
	}
	return o, nil
}

// Close releases the statements and the database.
func (o *Outbox) Close() error {
	var errs []error
	for _, st := range []*sqlx.Stmt{o.lookup, o.insert, o.claimed, o.markDone, o.claimDue, o.nextDue} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(append(errs, o.DB.Close())...)
}

type acceptRow struct {
	Fingerprint     []byte         `db:"request_fingerprint"`
	Version         int            `db:"fingerprint_version"`
	Status          string         `db:"status"`
	BrokerMessageID sql.NullString `db:"broker_message_id"`
	HistoryID       sql.NullString `db:"history_id"`
	LastError       sql.NullString `db:"last_error"`
}

// insertSQL is the new row of an accept: pending with no attempt, or
// claimed at once (inflight, its first attempt counted). An id that has a
// row of the same mesh (sender) already inserts nothing: the insert is the
// §4.5 lookup's first half. Another sender's row of the same id is no
// conflict: a client_message_id is unique per (client_message_id, mesh)
// (outbox migration 0006).
const insertSQL = `INSERT INTO outbox (id, client_message_id, mesh, request_fingerprint, fingerprint_version, payload,
                     enqueued_at, attempts, next_attempt_at, status, mail, thread_id, ack_required)
 VALUES (?, ?, ?, ?, ?, ?, ?, %d, ?, '%s', ?, ?, ?)
 ON CONFLICT(client_message_id, mesh) DO NOTHING`

// Accept runs the §4.5 lookup-and-insert inside the caller's batch
// transaction, as one statement for a new id (the common case): the
// insert, which does nothing when the sender's id has a row; only then is
// the row read and the table applied. Being one statement, it needs no
// savepoint: a failing insert undoes itself. With claim, a new row is
// inserted already claimed for sending (inflight, attempts 1): the
// dispatcher has room and nothing older is waiting, so a separate claim
// would pick exactly this row.
func (o *Outbox) Accept(tx *Tx, cmd *messages.AcceptSend, claim bool) (*messages.AcceptResult, error) {
	insert := o.insert
	if claim {
		insert = o.claimed
	}
	mail, thread, ack := mailColumns(cmd.Mail)
	n, err := affected(tx.Prepared(insert).Exec(cmd.RowID, cmd.ClientMessageID, cmd.Mesh, cmd.Fingerprint[:],
		messages.FingerprintScoped, cmd.Payload, cmd.Now, cmd.Now, mail, thread, ack))
	switch {
	case err != nil:
		return nil, fmt.Errorf("insert outbox row: %w", err)
	case n == 1:
		return &messages.AcceptResult{Outcome: messages.AcceptQueued, Inserted: true}, nil
	}
	var row acceptRow
	if err := tx.Prepared(o.lookup).Get(&row, cmd.ClientMessageID, cmd.Mesh); err != nil {
		return nil, fmt.Errorf("look up client_message_id: %w", err)
	}
	return decide(&row, cmd), nil
}

// decide is the §4.5 table for an id that already has a row of the
// request's sender. The request is compared in the form the row was
// stored in: a row written since migration 0006 holds the fingerprint
// scoped to its sender; one written before holds §4.3's form alone, and
// a retry of it after the upgrade — the same sender, since the row was
// found under the request's mesh — is compared in that form, so that it
// is still recognised as the same request (a pending or inflight row is
// answered 202, a done one 200 duplicate, as before the upgrade).
func decide(row *acceptRow, cmd *messages.AcceptSend) *messages.AcceptResult {
	fp := &cmd.Fingerprint
	if row.Version == messages.FingerprintSpec {
		fp = &cmd.SpecFingerprint
	}
	match := subtle.ConstantTimeCompare(row.Fingerprint, fp[:]) == 1
	r := &messages.AcceptResult{Outcome: messages.AcceptConflict}
	switch {
	case row.Status == messages.StatusPending && match:
		r.Outcome = messages.AcceptQueued
	case row.Status == messages.StatusInflight && match:
		r.Outcome = messages.AcceptInflight
	case row.Status == messages.StatusDone && match:
		r.Outcome = messages.AcceptDuplicate
		r.BrokerMessageID, r.HistoryID = nullable(row.BrokerMessageID), nullable(row.HistoryID)
	case row.Status == messages.StatusDone:
		r.BrokerMessageID = nullable(row.BrokerMessageID)
	case row.Status == messages.StatusDead:
		r.Reason = nullable(row.LastError)
	}
	if r.Outcome == messages.AcceptConflict {
		verdict := "mismatch"
		if match {
			verdict = "match"
		}
		r.Conflict = "outbox_" + row.Status + "_fingerprint_" + verdict
	}
	return r
}

// mailColumns are a row's mail, thread_id and ack_required for header m
// (nil: NULL, NULL, 0).
func mailColumns(m *messages.Mail) (mail, thread any, ack int) {
	if m == nil {
		return nil, nil, 0
	}
	if m.AckRequired {
		ack = 1
	}
	return string(m.JSON()), optional(m.ThreadID), ack
}

func nullable(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	return &s.String
}

// RecoverInflight returns every inflight row to pending (spec §4.13 step 1):
// attempts+1, next attempt after minBackoff. It runs at start, before IPC.
func (o *Outbox) RecoverInflight(ctx context.Context, now time.Time, minBackoff time.Duration) (int64, error) {
	res, err := o.db.ExecContext(ctx,
		`UPDATE outbox SET status = 'pending', attempts = attempts + 1, next_attempt_at = ?
		  WHERE status = 'inflight'`, now.Add(minBackoff).UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("recover inflight rows: %w", err)
	}
	return res.RowsAffected()
}

// ReleaseInflight returns the rows this process left inflight to pending
// at a graceful shutdown, without counting an attempt (no attempt failed).
func (o *Outbox) ReleaseInflight(ctx context.Context, now time.Time) (int64, error) {
	res, err := o.db.ExecContext(ctx,
		`UPDATE outbox SET status = 'pending', next_attempt_at = ? WHERE status = 'inflight'`, now.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("release inflight rows: %w", err)
	}
	return res.RowsAffected()
}

func isoTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

func nullTime(v sql.NullInt64) *string {
	if !v.Valid {
		return nil
	}
	s := isoTime(v.Int64)
	return &s
}

type requeueRow struct {
	Status          string         `db:"status"`
	ClientMessageID string         `db:"client_message_id"`
	Mesh            string         `db:"mesh"`
	Fingerprint     []byte         `db:"request_fingerprint"`
	Version         int            `db:"fingerprint_version"`
	Payload         []byte         `db:"payload"`
	Mail            sql.NullString `db:"mail"`
	ThreadID        sql.NullString `db:"thread_id"`
	AckRequired     int            `db:"ack_required"`
}

// Requeue retires a dead or pending row and inserts its successor under a
// new client_message_id (spec §4.7), in the replacement's mesh or else the
// old row's: the new id must be free for that sender. Without a
// replacement the successor keeps the old fingerprint and its form. Run
// inside one savepoint: any failure leaves both rows as they were.
func (o *Outbox) Requeue(tx *Tx, cmd *messages.RequeueOutbox) (*messages.RequeueResult, error) {
	old, err := retirable(tx, cmd.ID, cmd.Scope, "requeued", messages.CodeRequeueNotEligible)
	if err != nil {
		return nil, err
	}
	mesh, fp, version, payload := old.Mesh, old.Fingerprint, old.Version, []byte(nil)
	var mail, thread any = nullable(old.Mail), nullable(old.ThreadID)
	ack := old.AckRequired
	if r := cmd.Replacement; r != nil {
		mesh, fp, version, payload = r.Mesh, r.Fingerprint[:], messages.FingerprintScoped, r.Payload
		mail, thread, ack = mailColumns(r.Mail)
	} else if payload, err = messages.ReassignFrame(old.Payload, cmd.NewClientMessageID); err != nil {
		return nil, err
	}
	var taken int
	if err := tx.Get(&taken, "SELECT COUNT(*) FROM outbox WHERE client_message_id = ? AND mesh = ?",
		cmd.NewClientMessageID, mesh); err != nil {
		return nil, fmt.Errorf("check new client_message_id: %w", err)
	}
	if taken > 0 {
		return nil, &messages.Error{Status: 409, Code: messages.CodeClientIDInUse,
			Detail: "client_message_id " + cmd.NewClientMessageID + " already has an outbox row of mesh " + mesh + "; ids are never reused"}
	}
	if _, err := tx.Exec(`UPDATE outbox SET status = 'aborted', aborted_at = ?, aborted_by = 'operator', superseded_by = ?
	                       WHERE id = ?`, cmd.Now, cmd.NewRowID, cmd.ID); err != nil {
		return nil, fmt.Errorf("abort outbox row: %w", err)
	}
	n, err := affected(tx.Prepared(o.insert).Exec(cmd.NewRowID, cmd.NewClientMessageID, mesh, fp, version, payload, cmd.Now, cmd.Now,
		mail, thread, ack))
	switch {
	case err != nil:
		return nil, fmt.Errorf("insert successor row: %w", err)
	case n != 1:
		return nil, fmt.Errorf("insert successor row: client_message_id %s has a row of mesh %s already", cmd.NewClientMessageID, mesh)
	}
	return &messages.RequeueResult{AbortedRowID: cmd.ID, NewRowID: cmd.NewRowID, NewClientMessageID: cmd.NewClientMessageID}, nil
}

// retirable reads row id for an operator's requeue or drop (verb, and the
// 409's code): only a dead or pending row can be retired; 404 and 409
// otherwise. With a scope (a session's route), a row of another mesh is
// not found.
func retirable(tx *Tx, id, scope, verb, code string) (*requeueRow, error) {
	var old requeueRow
	err := tx.Get(&old, `SELECT status, client_message_id, mesh, request_fingerprint, fingerprint_version, payload,
	                            mail, thread_id, ack_required
	                       FROM outbox WHERE id = ?1 AND (?2 = '' OR mesh = ?2)`, id, scope)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &messages.Error{Status: 404, Code: messages.CodeRowNotFound, Detail: "no outbox row with id " + id}
	}
	if err != nil {
		return nil, fmt.Errorf("look up outbox row: %w", err)
	}
	if old.Status != messages.StatusDead && old.Status != messages.StatusPending {
		detail := "only dead and pending rows can be " + verb + "; this one is " + old.Status
		if old.Status == messages.StatusInflight {
			detail += " (an attempt is under way; retry when it ends)"
		}
		return nil, &messages.Error{Status: 409, Code: code, Detail: detail}
	}
	return &old, nil
}

// Drop gives up on a dead or pending row (spec A18: abort without
// successor): it becomes aborted by the operator, is never sent, and its
// client_message_id stays taken — a retry of it is refused (409).
func (o *Outbox) Drop(tx *Tx, cmd *messages.DropOutbox) (*messages.DropResult, error) {
	old, err := retirable(tx, cmd.ID, cmd.Scope, "dropped", messages.CodeDropNotEligible)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(`UPDATE outbox SET status = 'aborted', aborted_at = ?, aborted_by = 'operator', superseded_by = NULL
	                       WHERE id = ?`, cmd.Now, cmd.ID); err != nil {
		return nil, fmt.Errorf("abort outbox row: %w", err)
	}
	return &messages.DropResult{AbortedRowID: cmd.ID, ClientMessageID: old.ClientMessageID}, nil
}

// CompactPayloads empties the payload of up to limit rows that are done or
// aborted since before olderThan (Unix ms; [outbox] retention_days) and
// returns how many it changed. The rows stay, with their id and
// fingerprint: a retry of the id is still answered from them. Neither
// status is ever sent again, so nothing needs the payload.
func (o *Outbox) CompactPayloads(tx *Tx, olderThan int64, limit int) (int64, error) {
	var total int64
	for _, q := range []string{
		// INDEXED BY: the index holds exactly the done rows that still
		// have a payload; without statistics the planner may not see it.
		`UPDATE outbox SET payload = x'' WHERE id IN (SELECT id FROM outbox INDEXED BY outbox_done_payload
		  WHERE status = 'done' AND length(payload) > 0 AND delivered_at < ?1 LIMIT ?2 + 0)`,
		`UPDATE outbox SET payload = x'' WHERE id IN (SELECT id FROM outbox
		  WHERE status = 'aborted' AND length(payload) > 0 AND aborted_at < ?1 LIMIT ?2 + 0)`,
	} {
		res, err := tx.Exec(q, olderThan, limit-int(total))
		if err != nil {
			return total, fmt.Errorf("compact outbox payloads: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("compact outbox payloads: %w", err)
		}
		if total += n; total >= int64(limit) {
			break
		}
	}
	return total, nil
}

// Counts returns the number of rows per mesh and status.
func (o *Outbox) Counts(tx *Tx) (map[string]map[string]int, error) {
	var rows []struct {
		Mesh   string `db:"mesh"`
		Status string `db:"status"`
		N      int    `db:"n"`
	}
	if err := tx.Select(&rows, "SELECT mesh, status, COUNT(*) AS n FROM outbox GROUP BY mesh, status"); err != nil {
		return nil, fmt.Errorf("count outbox rows: %w", err)
	}
	out := make(map[string]map[string]int)
	for _, r := range rows {
		if out[r.Mesh] == nil {
			out[r.Mesh] = make(map[string]int)
		}
		out[r.Mesh][r.Status] = r.N
	}
	return out, nil
}
