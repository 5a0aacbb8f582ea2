package persistence

import (
	"database/sql/driver"
	"fmt"
	"time"

	"modernc.org/sqlite"

	"github.com/claudemesh/claudemesh-go/messages"
)

// init registers two SQL functions with the driver: audit_hash(prev_hash,
// seq, at, kind, subject, detail), messages.AuditHash, and audit_now(),
// the time in Unix ms. outbox.db's audit triggers (migration 0007) call
// them, so every connection that writes to the outbox needs them — the
// daemon's, and any other process's that links this package (CLI tools,
// tests). The driver gives registered functions to the connections it
// opens afterwards, hence init, like the driver's own registration.
func init() {
	sqlite.MustRegisterDeterministicScalarFunction("audit_hash", 6, auditHash)
	sqlite.MustRegisterScalarFunction("audit_now", 0, func(*sqlite.FunctionContext, []driver.Value) (driver.Value, error) {
		return time.Now().UnixMilli(), nil
	})
}

// auditHash is audit_hash's body: integers for seq and at, text for the
// rest; anything else (a NULL) fails the statement that appends.
func auditHash(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	var text [4]string
	for i, a := range []driver.Value{args[0], args[3], args[4], args[5]} {
		switch v := a.(type) {
		case string:
			text[i] = v
		case []byte:
			text[i] = string(v)
		default:
			return nil, fmt.Errorf("audit_hash: argument is %T, want text", a)
		}
	}
	seq, ok1 := args[1].(int64)
	at, ok2 := args[2].(int64)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("audit_hash: seq and at must be integers, got %T and %T", args[1], args[2])
	}
	return messages.AuditHash(text[0], seq, at, text[1], text[2], text[3]), nil
}

type auditRow struct {
	Seq      int64  `db:"seq"`
	At       int64  `db:"at"`
	Kind     string `db:"kind"`
	Subject  string `db:"subject"`
	Detail   string `db:"detail"`
	PrevHash string `db:"prev_hash"`
	Hash     string `db:"hash"`
}

// ListAudit returns the audit entries after seq q.After, oldest first, at
// most q.Limit of them, and the cursor of the next page if there is one.
func (o *Outbox) ListAudit(tx *Tx, q *messages.ListAudit) (*messages.AuditPage, error) {
	var rows []auditRow
	if err := tx.Select(&rows, `SELECT seq, at, kind, subject, detail, prev_hash, hash FROM audit
	                             WHERE seq > ? ORDER BY seq LIMIT ?`, q.After, q.Limit+1); err != nil {
		return nil, fmt.Errorf("list audit entries: %w", err)
	}
	page := &messages.AuditPage{Entries: make([]messages.AuditEntry, 0, min(len(rows), q.Limit))}
	if len(rows) > q.Limit {
		rows = rows[:q.Limit]
		page.NextAfter = rows[len(rows)-1].Seq
	}
	for _, r := range rows {
		page.Entries = append(page.Entries, messages.AuditEntry{Seq: r.Seq, At: messages.AuditTime(r.At), Kind: r.Kind,
			Subject: r.Subject, Detail: r.Detail, PrevHash: r.PrevHash, Hash: r.Hash})
	}
	return page, nil
}

// PruneAudit deletes the oldest audit entries written before olderThan
// (Unix ms; the outbox's retention window), at most limit of them, and
// returns how many it deleted. It deletes a prefix of the log and never
// the newest entry: the entries before the first one kept are gone, the
// chain from it on is whole (a clock that went back cannot make a hole),
// and the next entry still links to the newest. A pass that deleted
// entries appends "audit.pruned", naming the first seq kept, so that the
// log itself says where it starts; verification starts there, trusting
// that entry's prev_hash.
func (o *Outbox) PruneAudit(tx *Tx, olderThan int64, limit int) (int64, error) {
	var keep int64
	if err := tx.Get(&keep, `SELECT min(
	    ifnull((SELECT seq FROM (SELECT seq, at FROM audit ORDER BY seq LIMIT ?2) WHERE at >= ?1 ORDER BY seq LIMIT 1),
	           ifnull((SELECT seq FROM audit ORDER BY seq LIMIT 1 OFFSET ?2), 9223372036854775807)),
	    (SELECT ifnull(max(seq), 0) FROM audit))`, olderThan, limit); err != nil {
		return 0, fmt.Errorf("find the audit entries to prune: %w", err)
	}
	n, err := affected(tx.Exec(`DELETE FROM audit WHERE seq < ?`, keep))
	if err != nil || n == 0 {
		if err != nil {
			err = fmt.Errorf("prune audit entries: %w", err)
		}
		return 0, err
	}
	if _, err := tx.Exec(`INSERT INTO audit_append (kind, subject, detail)
	                        VALUES ('audit.pruned', 'audit', json_object('entries', ?1, 'first_kept_seq', ?2))`, n, keep); err != nil {
		return 0, fmt.Errorf("record the audit pruning: %w", err)
	}
	return n, nil
}
