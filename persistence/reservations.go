package persistence

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Held reservation grants and their transitions' audit entries
// (migration 0010), as locks.go does for locks.

// RecordReservation writes m's audit entry and keeps, narrows or forgets
// its held grant, in tx.
func (o *Outbox) RecordReservation(tx *Tx, m *messages.RecordReservation) error {
	patterns, _ := json.Marshal(m.Patterns) // strings always marshal
	if err := appendReservationAudit(tx, m.Kind, m.Route, m.Mesh, m.Repo, m.Holder, m.Fence, string(patterns)); err != nil {
		return err
	}
	var err error
	if m.Kind == messages.LockKindAcquired && m.Keep {
		_, err = tx.Exec(`INSERT INTO held_reservation (route, repo, fence, mesh, holder, patterns, ttl_ms, acquired_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (route, repo, fence) DO UPDATE SET patterns = excluded.patterns, ttl_ms = excluded.ttl_ms`,
			m.Route, m.Repo, m.Fence, m.Mesh, m.Holder, string(patterns), m.TTL.Milliseconds(), m.Now)
	} else if m.Kind != messages.LockKindAcquired && len(m.Remaining) > 0 {
		remaining, _ := json.Marshal(m.Remaining) // strings always marshal
		_, err = tx.Exec(`UPDATE held_reservation SET patterns = ? WHERE route = ? AND repo = ? AND fence = ?`, string(remaining), m.Route,
			m.Repo, m.Fence)
	} else if m.Kind != messages.LockKindAcquired {
		_, err = tx.Exec(`DELETE FROM held_reservation WHERE route = ? AND repo = ? AND fence = ?`, m.Route, m.Repo, m.Fence)
	}
	if err != nil {
		return fmt.Errorf("record reservation: %w", err)
	}
	return nil
}

// appendReservationAudit appends the entry reservation.<kind>: subject
// the repository, detail its route, mesh, holder, fence token and
// patterns.
func appendReservationAudit(tx *Tx, kind, route, mesh, repo, holder string, fence int64, patterns string) error {
	detail, _ := json.Marshal(struct { // strings, a number and a JSON array always marshal
		Route    string          `json:"route"`
		Mesh     string          `json:"mesh"`
		Holder   string          `json:"holder"`
		Fence    int64           `json:"fence_token"`
		Patterns json.RawMessage `json:"patterns"`
	}{route, mesh, holder, fence, json.RawMessage(patterns)})
	if _, err := tx.Exec(`INSERT INTO audit_append (kind, subject, detail) VALUES (?, ?, ?)`, "reservation."+kind, repo, string(detail)); err != nil {
		return fmt.Errorf("audit reservation: %w", err)
	}
	return nil
}

type heldReservationRow struct {
	Repo     string `db:"repo"`
	Fence    int64  `db:"fence"`
	Mesh     string `db:"mesh"`
	Holder   string `db:"holder"`
	Patterns string `db:"patterns"`
	TTLMs    int64  `db:"ttl_ms"`
}

func (o *Outbox) heldReservations(tx *Tx, route string) ([]heldReservationRow, error) {
	var rows []heldReservationRow
	if err := tx.Select(&rows, `SELECT repo, fence, mesh, holder, patterns, ttl_ms FROM held_reservation WHERE route = ? ORDER BY repo, fence`,
		route); err != nil {
		return nil, fmt.Errorf("read held reservations: %w", err)
	}
	return rows, nil
}

// HeldReservations returns the grants route keeps.
func (o *Outbox) HeldReservations(tx *Tx, route string) ([]messages.HeldReservation, error) {
	rows, err := o.heldReservations(tx, route)
	out := make([]messages.HeldReservation, len(rows))
	for i, r := range rows {
		out[i] = messages.HeldReservation{Repo: r.Repo, Mesh: r.Mesh, Fence: r.Fence, TTL: time.Duration(r.TTLMs) * time.Millisecond}
		_ = json.Unmarshal([]byte(r.Patterns), &out[i].Patterns) // written by RecordReservation
	}
	return out, err
}

// abandonHeldReservations forgets every grant route keeps, each with its
// audit entry reservation.abandoned.
func (o *Outbox) abandonHeldReservations(tx *Tx, route string) error {
	rows, err := o.heldReservations(tx, route)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := appendReservationAudit(tx, messages.LockKindAbandoned, route, r.Mesh, r.Repo, r.Holder, r.Fence, r.Patterns); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(`DELETE FROM held_reservation WHERE route = ?`, route); err != nil {
		return fmt.Errorf("abandon held reservations: %w", err)
	}
	return nil
}
