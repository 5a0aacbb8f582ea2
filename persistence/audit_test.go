package persistence

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// auditLog reads the whole audit log, oldest first, a page of two at a
// time (the paging is part of what is read).
func auditLog(t *testing.T, o *Outbox) []messages.AuditEntry {
	t.Helper()
	var all []messages.AuditEntry
	q := &messages.ListAudit{Limit: 2}
	for {
		var page *messages.AuditPage
		if err := run(t, o.DB, func(tx *Tx) (err error) {
			page, err = o.ListAudit(tx, q)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Entries...)
		if page.NextAfter == 0 {
			return all
		}
		q.After = page.NextAfter
	}
}

// kinds is "kind subject" of each entry, one per line.
func kinds(entries []messages.AuditEntry) string {
	var b strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&b, "%s %s\n", e.Kind, e.Subject)
	}
	return b.String()
}

// verify runs messages.VerifyAudit over the log as a client would, page
// by page, and returns its error.
func verify(t *testing.T, o *Outbox) error {
	t.Helper()
	entries := auditLog(t, o)
	var prev *messages.AuditEntry
	var err error
	for i := 0; i < len(entries); i += 3 {
		if prev, err = messages.VerifyAudit(prev, entries[i:min(i+3, len(entries))]); err != nil {
			return err
		}
	}
	return nil
}

// TestAuditEveryTransition: every transition an outbox row goes through —
// each code path that writes one — appends exactly one entry, in order,
// and the chain verifies.
func TestAuditEveryTransition(t *testing.T) {
	o := openTestOutbox(t)
	enqueue(t, o, "m", "a", 1)
	enqueue(t, o, "m", "a", 1) // the same id again: no row, no entry
	claim(t, o, "m", 10, 5)
	for _, step := range []func(tx *Tx) error{
		func(tx *Tx) error { return o.Retry(tx, "row-a", "broker 503", 20) },
		func(tx *Tx) error { _, err := o.ClaimDue(tx, "m", 30, 5); return err },
		func(tx *Tx) error { _, err := o.ReleaseMesh(tx, "m", 40); return err },
		func(tx *Tx) error { _, err := o.ClaimDue(tx, "m", 50, 5); return err },
		func(tx *Tx) error { return o.MarkDone(tx, "row-a", "brk-1", "", 60) },
		func(tx *Tx) error {
			_, err := o.Accept(tx, &messages.AcceptSend{Mesh: "m", ClientMessageID: "b", RowID: "row-b",
				Fingerprint: messages.Fingerprint{2}, Payload: []byte(`{"id":"b"}`), Now: 70}, true)
			return err
		},
		func(tx *Tx) error { return o.MarkDead(tx, "row-b", "payload too large", 80) },
		func(tx *Tx) error {
			_, err := o.Requeue(tx, &messages.RequeueOutbox{ID: "row-b", NewRowID: "row-c", NewClientMessageID: "c", Now: 90})
			return err
		},
		func(tx *Tx) error { _, err := o.Drop(tx, &messages.DropOutbox{ID: "row-c", Now: 100}); return err },
		func(tx *Tx) error { _, err := o.CompactPayloads(tx, time.Now().UnixMilli(), 10); return err },
	} {
		if err := run(t, o.DB, step); err != nil {
			t.Fatal(err)
		}
	}
	enqueue(t, o, "m", "d", time.Now().UnixMilli())
	claim(t, o, "m", time.Now().Add(time.Second).UnixMilli(), 5)
	if _, err := o.RecoverInflight(t.Context(), time.Now(), time.Second); err != nil {
		t.Fatal(err)
	}
	enqueue(t, o, "m", "e", 1)
	if err := run(t, o.DB, func(tx *Tx) error { _, err := o.ExpireOld(tx, "m", 2, 3); return err }); err != nil {
		t.Fatal(err)
	}
	o.db.MustExec(`DELETE FROM outbox WHERE id = 'row-e'`) // no code does; the log still says so

	entries := auditLog(t, o)
	want := `outbox.accepted a
outbox.inflight a
outbox.pending a
outbox.inflight a
outbox.pending a
outbox.inflight a
outbox.done a
outbox.accepted b
outbox.dead b
outbox.aborted b
outbox.accepted c
outbox.aborted c
outbox.pruned a
outbox.pruned b
outbox.pruned c
outbox.accepted d
outbox.inflight d
outbox.pending d
outbox.accepted e
outbox.dead e
outbox.deleted e
`
	if got := kinds(entries); got != want {
		t.Fatalf("audit log:\n%s\nwant\n%s", got, want)
	}
	for i, e := range entries {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d has seq %d", i, e.Seq)
		}
	}
	details := map[int]map[string]any{
		1:  {"mesh": "m", "id": "row-a", "status": "pending", "attempts": 0.0},
		7:  {"mesh": "m", "id": "row-a", "from": "inflight", "to": "done", "attempts": 3.0, "last_error": "broker 503", "broker_message_id": "brk-1"},
		8:  {"mesh": "m", "id": "row-b", "status": "inflight", "attempts": 1.0},
		10: {"mesh": "m", "id": "row-b", "from": "dead", "to": "aborted", "attempts": 1.0, "last_error": "payload too large", "aborted_by": "operator", "superseded_by": "row-c"},
		12: {"mesh": "m", "id": "row-c", "from": "pending", "to": "aborted", "attempts": 0.0, "aborted_by": "operator"},
		18: {"mesh": "m", "id": "row-d", "from": "inflight", "to": "pending", "attempts": 2.0},
		20: {"mesh": "m", "id": "row-e", "from": "pending", "to": "dead", "attempts": 0.0, "last_error": ReasonMaxAge},
	}
	for seq, want := range details {
		var got map[string]any
		if err := json.Unmarshal([]byte(entries[seq-1].Detail), &got); err != nil {
			t.Fatalf("seq %d detail %q: %v", seq, entries[seq-1].Detail, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("seq %d detail %s, want %v", seq, entries[seq-1].Detail, want)
		}
	}
	if entries[0].PrevHash != messages.AuditGenesis {
		t.Errorf("first prev_hash %q", entries[0].PrevHash)
	}
	if err := verify(t, o); err != nil {
		t.Fatal(err)
	}
}

// TestAuditRollback: a transition rolled back — a command's savepoint, or
// a whole batch — leaves no entry, and the chain goes on from the last
// committed one.
func TestAuditRollback(t *testing.T) {
	o := openTestOutbox(t)
	enqueue(t, o, "m", "a", 1)
	err := run(t, o.DB, func(tx *Tx) error {
		if _, err := o.ClaimDue(tx, "m", 10, 5); err != nil {
			return err
		}
		return errors.New("the command fails after its transition")
	})
	if err == nil {
		t.Fatal("want the command's error")
	}
	b := mustBegin(t, o.DB)
	if _, err := o.ClaimDue(b.Tx(), "m", 10, 5); err != nil {
		t.Fatal(err)
	}
	b.Rollback()
	if got := kinds(auditLog(t, o)); got != "outbox.accepted a\n" {
		t.Fatalf("after the rollbacks:\n%s", got)
	}
	claim(t, o, "m", 10, 5)
	if got := kinds(auditLog(t, o)); got != "outbox.accepted a\noutbox.inflight a\n" {
		t.Fatalf("after a committed claim:\n%s", got)
	}
	if err := verify(t, o); err != nil {
		t.Fatal(err)
	}
}

// TestAuditTamper: tampering with one entry is detected at that entry;
// a deleted entry is detected as a gap at the entry after it.
func TestAuditTamper(t *testing.T) {
	for _, tc := range []struct {
		name, sql string
		seq       int64
		check     string
	}{
		{"detail", `UPDATE audit SET detail = replace(detail, 'row-a', 'row-z') WHERE seq = 3`, 3, messages.AuditHashMismatch},
		{"kind", `UPDATE audit SET kind = 'outbox.done' WHERE seq = 4`, 4, messages.AuditHashMismatch},
		{"subject", `UPDATE audit SET subject = 'x' WHERE seq = 2`, 2, messages.AuditHashMismatch},
		{"at", `UPDATE audit SET at = at + 1 WHERE seq = 4`, 4, messages.AuditHashMismatch},
		{"hash", `UPDATE audit SET hash = '` + strings.Repeat("ab", 32) + `' WHERE seq = 3`, 3, messages.AuditHashMismatch},
		{"first entry", `UPDATE audit SET detail = '{}' WHERE seq = 1`, 1, messages.AuditHashMismatch},
		{"last entry's prev_hash", `UPDATE audit SET prev_hash = '` + strings.Repeat("cd", 32) + `' WHERE seq = 5`, 5,
			messages.AuditHashMismatch},
		{"rehashed entry", `UPDATE audit SET detail = '{}', hash = audit_hash(prev_hash, seq, at, kind, subject, '{}') WHERE seq = 3`,
			4, "prev_hash does not match entry 3"},
		{"genesis", `UPDATE audit SET prev_hash = '` + strings.Repeat("1", 64) + `',
		                    hash = audit_hash('` + strings.Repeat("1", 64) + `', seq, at, kind, subject, detail) WHERE seq = 1`,
			1, messages.AuditBadGenesis},
		{"deleted middle entry", `DELETE FROM audit WHERE seq = 3`, 4, messages.AuditSeqGap + " (it follows seq 2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := openTestOutbox(t)
			enqueue(t, o, "m", "a", 1)
			enqueue(t, o, "m", "b", 1)
			claim(t, o, "m", 10, 5)
			if err := run(t, o.DB, func(tx *Tx) error { return o.MarkDone(tx, "row-a", "brk-1", "", 20) }); err != nil {
				t.Fatal(err)
			}
			if err := verify(t, o); err != nil {
				t.Fatalf("before tampering: %v", err)
			}
			o.db.MustExec(tc.sql)
			var br *messages.AuditBreak
			if err := verify(t, o); !errors.As(err, &br) || br.Seq != tc.seq || br.Check != tc.check {
				t.Fatalf("verify after tampering: %v, want a break at seq %d: %s", err, tc.seq, tc.check)
			}
		})
	}
}

// TestPruneAudit: retention deletes a prefix of the log, at most its
// limit, never the newest entry, and records itself; what is left
// verifies from the first entry kept.
func TestPruneAudit(t *testing.T) {
	o := openTestOutbox(t)
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		enqueue(t, o, "m", id, 1)
	}
	prune := func(olderThan int64, limit int) int64 {
		t.Helper()
		var n int64
		if err := run(t, o.DB, func(tx *Tx) (err error) {
			n, err = o.PruneAudit(tx, olderThan, limit)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := prune(0, 100); n != 0 {
		t.Fatalf("nothing is that old, pruned %d", n)
	}
	// seq 4 is dated after the cutoff (a clock set back after it): only
	// seq 1..3 go, never 5 and 6, which would leave a hole.
	o.db.MustExec(`UPDATE audit SET at = at + 3600000 WHERE seq = 4`)
	if n := prune(time.Now().Add(time.Minute).UnixMilli(), 100); n != 3 {
		t.Fatalf("pruned %d, want 3", n)
	}
	entries := auditLog(t, o)
	if entries[0].Seq != 4 || entries[len(entries)-1].Kind != "audit.pruned" ||
		entries[len(entries)-1].Detail != `{"entries":3,"first_kept_seq":4}` {
		t.Fatalf("after pruning:\n%+v", entries)
	}
	o.db.MustExec(`UPDATE audit SET at = 0 WHERE seq = 4`)
	if n := prune(time.Now().Add(time.Minute).UnixMilli(), 2); n != 2 {
		t.Fatalf("pruned %d, want the limit 2", n)
	}
	if n := prune(time.Now().Add(time.Minute).UnixMilli(), 100); n != 2 {
		t.Fatalf("pruned %d, want all but the newest: 2", n)
	}
	entries = auditLog(t, o)
	if len(entries) != 2 || entries[0].Seq != 8 || entries[1].Seq != 9 {
		t.Fatalf("after pruning all: %s", kinds(entries))
	}
	if err := verify(t, o); err != nil {
		t.Fatal(err)
	}
	enqueue(t, o, "m", "g", 1)
	if err := verify(t, o); err != nil {
		t.Fatal(err)
	}
}
