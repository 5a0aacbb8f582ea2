package persistence

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Held locks and the lock transitions' audit entries (migration 0008).

// RecordLock writes m's audit entry and keeps or forgets its held lock,
// in tx.
func (o *Outbox) RecordLock(tx *Tx, m *messages.RecordLock) error {
	if err := appendLockAudit(tx, m.Kind, m.Key, m.Route, m.Mesh, m.Repo, m.Holder, m.Fence); err != nil {
		return err
	}
	var err error
	if m.Kind == messages.LockKindAcquired && m.Keep {
		_, err = tx.Exec(`INSERT INTO held_lock (route, repo, key, mesh, holder, fence, ttl_ms, acquired_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (route, repo, key) DO UPDATE SET mesh = excluded.mesh, holder = excluded.holder, fence = excluded.fence,
				ttl_ms = excluded.ttl_ms, acquired_at = excluded.acquired_at`,
			m.Route, m.Repo, m.Key, m.Mesh, m.Holder, m.Fence, m.TTL.Milliseconds(), m.Now)
	} else if m.Kind != messages.LockKindAcquired {
		_, err = tx.Exec(`DELETE FROM held_lock WHERE route = ? AND repo = ? AND key = ?`, m.Route, m.Repo, m.Key)
	}
	if err != nil {
		return fmt.Errorf("record lock: %w", err)
	}
	return nil
}

// appendLockAudit appends the entry lock.<kind> of a lock: subject its
// key, detail its route, mesh, repository, holder and fence token.
func appendLockAudit(tx *Tx, kind, key, route, mesh, repo, holder string, fence int64) error {
	detail, _ := json.Marshal(struct { // strings and a number always marshal
		Route  string `json:"route"`
		Mesh   string `json:"mesh"`
		Repo   string `json:"repo,omitempty"`
		Holder string `json:"holder"`
		Fence  int64  `json:"fence_token"`
	}{route, mesh, repo, holder, fence})
	if _, err := tx.Exec(`INSERT INTO audit_append (kind, subject, detail) VALUES (?, ?, ?)`, "lock."+kind, key, string(detail)); err != nil {
		return fmt.Errorf("audit lock: %w", err)
	}
	return nil
}

type heldLockRow struct {
	Repo   string `db:"repo"`
	Key    string `db:"key"`
	Mesh   string `db:"mesh"`
	Holder string `db:"holder"`
	Fence  int64  `db:"fence"`
	TTLMs  int64  `db:"ttl_ms"`
}

func (o *Outbox) heldLocks(tx *Tx, route string) ([]heldLockRow, error) {
	var rows []heldLockRow
	if err := tx.Select(&rows, `SELECT repo, key, mesh, holder, fence, ttl_ms FROM held_lock WHERE route = ? ORDER BY repo, key`, route); err != nil {
		return nil, fmt.Errorf("read held locks: %w", err)
	}
	return rows, nil
}

// HeldLocks returns the locks route keeps.
func (o *Outbox) HeldLocks(tx *Tx, route string) ([]messages.HeldLock, error) {
	rows, err := o.heldLocks(tx, route)
	out := make([]messages.HeldLock, len(rows))
	for i, r := range rows {
		out[i] = messages.HeldLock{Repo: r.Repo, Key: r.Key, Mesh: r.Mesh, Fence: r.Fence, TTL: time.Duration(r.TTLMs) * time.Millisecond}
	}
	return out, err
}

// AbandonHeldLocks forgets every lock route keeps, each with its audit
// entry lock.abandoned, and every reservation grant it keeps
// (reservations.go).
func (o *Outbox) AbandonHeldLocks(tx *Tx, route string) error {
	rows, err := o.heldLocks(tx, route)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := appendLockAudit(tx, messages.LockKindAbandoned, r.Key, route, r.Mesh, r.Repo, r.Holder, r.Fence); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(`DELETE FROM held_lock WHERE route = ?`, route); err != nil {
		return fmt.Errorf("abandon held locks: %w", err)
	}
	return o.abandonHeldReservations(tx, route)
}
