package persistence

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// run executes fn as one command of its own committed batch on db and
// returns fn's error.
func run(t *testing.T, db *DB, fn func(tx *Tx) error) error {
	t.Helper()
	b, err := db.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ferr := b.Do(fn)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	return ferr
}

// enqueue accepts a send of client id cid to mesh at time at (row id
// "row-"+cid), due at at.
func enqueue(t *testing.T, o *Outbox, mesh, cid string, at int64) {
	t.Helper()
	err := run(t, o.DB, func(tx *Tx) error {
		_, err := o.Accept(tx, &messages.AcceptSend{Mesh: mesh, ClientMessageID: cid, RowID: "row-" + cid,
			Fingerprint: messages.Fingerprint{1}, Payload: []byte(`{"id":"` + cid + `"}`), Now: at}, false)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

type outboxState struct {
	Status        string  `db:"status"`
	Attempts      int     `db:"attempts"`
	NextAttemptAt int64   `db:"next_attempt_at"`
	LastError     *string `db:"last_error"`
	DeliveredAt   *int64  `db:"delivered_at"`
	BrokerID      *string `db:"broker_message_id"`
	HistoryID     *string `db:"history_id"`
	DeadAt        *int64  `db:"dead_at"`
}

func state(t *testing.T, o *Outbox, rowID string) outboxState {
	t.Helper()
	var s outboxState
	if err := o.db.Get(&s, `SELECT status, attempts, next_attempt_at, last_error, delivered_at,
	       broker_message_id, history_id, dead_at FROM outbox WHERE id = ?`, rowID); err != nil {
		t.Fatal(err)
	}
	return s
}

func claim(t *testing.T, o *Outbox, mesh string, now int64, limit int) []DueRow {
	t.Helper()
	var rows []DueRow
	if err := run(t, o.DB, func(tx *Tx) (err error) {
		rows, err = o.ClaimDue(tx, mesh, now, limit)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return rows
}

func ids(rows []DueRow) string {
	var s []string
	for _, r := range rows {
		s = append(s, r.ClientMessageID)
	}
	return strings.Join(s, ",")
}

func setStatus(t *testing.T, o *Outbox, rowID, status string) {
	t.Helper()
	o.db.MustExec("UPDATE outbox SET status = ? WHERE id = ?", status, rowID)
}

func TestClaimDue(t *testing.T) {
	o := openTestOutbox(t)
	// Enqueued out of order; "late" is due only at 500.
	enqueue(t, o, "m", "c", 30)
	enqueue(t, o, "m", "a", 10)
	enqueue(t, o, "other", "x", 5)
	enqueue(t, o, "m", "b", 20)
	enqueue(t, o, "m", "tie2", 40)
	enqueue(t, o, "m", "tie1", 40)
	enqueue(t, o, "m", "late", 1)
	o.db.MustExec("UPDATE outbox SET next_attempt_at = 500 WHERE id = 'row-late'")
	enqueue(t, o, "m", "done", 1)
	setStatus(t, o, "row-done", "done")

	if got := ids(claim(t, o, "m", 100, 0)); got != "" {
		t.Fatalf("limit 0 claimed %q", got)
	}
	first := claim(t, o, "m", 100, 2)
	if got := ids(first); got != "a,b" {
		t.Fatalf("first claim = %q, want a,b (oldest due first, limit 2)", got)
	}
	r := first[0]
	if r.ID != "row-a" || r.Attempts != 1 || r.EnqueuedAt != 10 || string(r.Payload) != `{"id":"a"}` {
		t.Fatalf("claimed row %+v", r)
	}
	if s := state(t, o, "row-a"); s.Status != "inflight" || s.Attempts != 1 {
		t.Fatalf("row a after claim: %+v", s)
	}
	if got := ids(claim(t, o, "m", 100, 10)); got != "c,tie1,tie2" {
		t.Fatalf("second claim = %q, want c,tie1,tie2 (inflight rows not reclaimed, ties by id, not due/other mesh/done excluded)", got)
	}
	if got := ids(claim(t, o, "m", 499, 10)); got != "" {
		t.Fatalf("nothing is due before 500, claimed %q", got)
	}
	if got := ids(claim(t, o, "m", 500, 10)); got != "late" {
		t.Fatalf("claim at 500 = %q, want late (due at exactly now)", got)
	}
	if got := ids(claim(t, o, "other", 100, 10)); got != "x" {
		t.Fatalf("other mesh claim = %q", got)
	}
	if s := state(t, o, "row-done"); s.Status != "done" || s.Attempts != 0 {
		t.Fatalf("done row touched: %+v", s)
	}
}

// TestAcceptClaimed: an accept told to claim inserts its row inflight with
// its first attempt counted, so no claim picks it again; an id that
// already has a row is answered as ever, its row untouched.
func TestAcceptClaimed(t *testing.T) {
	o := openTestOutbox(t)
	accept := func(cid string, claimed bool) *messages.AcceptResult {
		var res *messages.AcceptResult
		err := run(t, o.DB, func(tx *Tx) (err error) {
			res, err = o.Accept(tx, &messages.AcceptSend{Mesh: "m", ClientMessageID: cid, RowID: "row-" + cid,
				Fingerprint: messages.Fingerprint{1}, Payload: []byte(`{}`), Now: 10}, claimed)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := accept("a", true); !res.Inserted || res.Outcome != messages.AcceptQueued {
		t.Fatalf("claimed accept = %+v", res)
	}
	if s := state(t, o, "row-a"); s.Status != "inflight" || s.Attempts != 1 || s.NextAttemptAt != 10 {
		t.Fatalf("claimed row: %+v", s)
	}
	if got := ids(claim(t, o, "m", 100, 10)); got != "" {
		t.Fatalf("a claimed row was claimed again: %q", got)
	}
	if res := accept("a", true); res.Inserted || res.Outcome != messages.AcceptInflight {
		t.Fatalf("repeat of a claimed id = %+v, want inflight, nothing inserted", res)
	}
	if s := state(t, o, "row-a"); s.Attempts != 1 {
		t.Fatalf("repeat touched the row: %+v", s)
	}
}

// TestClaimDueUsesIndex: the candidates are read in claim order from
// outbox_queue, with no sort.
func TestClaimDueUsesIndex(t *testing.T) {
	o := openTestOutbox(t)
	rows, err := o.db.Queryx("EXPLAIN QUERY PLAN "+claimDueSQL, "m", 100, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var details []string
	for rows.Next() {
		var id, parent, notUsed int
		var detail string
		if err := rows.Scan(&id, &parent, &notUsed, &detail); err != nil {
			t.Fatal(err)
		}
		details = append(details, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(details, " | ")
	t.Log(joined)
	if !strings.Contains(joined, "INDEX outbox_queue (status=? AND mesh=?)") || strings.Contains(joined, "TEMP B-TREE") {
		t.Fatalf("plan does not read outbox_queue in order: %s", joined)
	}
	if strings.Contains(joined, "SCAN outbox") && !strings.Contains(joined, "SCAN outbox USING") {
		t.Fatalf("plan has a full table scan: %s", joined)
	}
}

func TestNextDue(t *testing.T) {
	o := openTestOutbox(t)
	next := func(mesh string) (int64, bool) {
		var at int64
		var ok bool
		if err := run(t, o.DB, func(tx *Tx) (err error) {
			at, ok, err = o.NextDue(tx, mesh)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return at, ok
	}
	if _, ok := next("m"); ok {
		t.Fatal("empty outbox has a due time")
	}
	enqueue(t, o, "m", "a", 300)
	enqueue(t, o, "m", "b", 200)
	enqueue(t, o, "other", "x", 100)
	if at, ok := next("m"); !ok || at != 200 {
		t.Fatalf("next due = %d %v, want 200", at, ok)
	}
	claim(t, o, "m", 250, 10) // b inflight
	if at, ok := next("m"); !ok || at != 300 {
		t.Fatalf("next due after claiming b = %d %v, want 300 (inflight rows do not count)", at, ok)
	}
	claim(t, o, "m", 300, 10)
	if _, ok := next("m"); ok {
		t.Fatal("no pending row left, yet a due time")
	}
}

// TestTransitions covers every single-row transition from every status:
// allowed ones apply, the others return ErrStateChanged and change nothing.
func TestTransitions(t *testing.T) {
	type op struct {
		name  string
		from  []string // statuses it applies to
		apply func(o *Outbox, tx *Tx, id string) error
		check func(t *testing.T, s outboxState)
	}
	ops := []op{
		{"done", []string{"inflight"},
			func(o *Outbox, tx *Tx, id string) error { return o.MarkDone(tx, id, "bm-1", "h-1", 777) },
			func(t *testing.T, s outboxState) {
				if s.Status != "done" || s.DeliveredAt == nil || *s.DeliveredAt != 777 || s.BrokerID == nil ||
					*s.BrokerID != "bm-1" || s.HistoryID == nil || *s.HistoryID != "h-1" {
					t.Fatalf("after MarkDone: %+v", s)
				}
			}},
		{"done-no-history", []string{"inflight"},
			func(o *Outbox, tx *Tx, id string) error { return o.MarkDone(tx, id, "bm-1", "", 777) },
			func(t *testing.T, s outboxState) {
				if s.Status != "done" || s.HistoryID != nil {
					t.Fatalf("an empty history id must be NULL: %+v", s)
				}
			}},
		{"dead", []string{"inflight", "pending"},
			func(o *Outbox, tx *Tx, id string) error { return o.MarkDead(tx, id, "rejected: 409", 888) },
			func(t *testing.T, s outboxState) {
				if s.Status != "dead" || s.LastError == nil || *s.LastError != "rejected: 409" || s.DeadAt == nil || *s.DeadAt != 888 {
					t.Fatalf("after MarkDead: %+v", s)
				}
			}},
		{"retry", []string{"inflight"},
			func(o *Outbox, tx *Tx, id string) error { return o.Retry(tx, id, "timeout", 999) },
			func(t *testing.T, s outboxState) {
				if s.Status != "pending" || s.NextAttemptAt != 999 || s.LastError == nil || *s.LastError != "timeout" || s.Attempts != 3 {
					t.Fatalf("after Retry: %+v", s)
				}
			}},
	}
	statuses := []string{"pending", "inflight", "done", "dead", "aborted"}
	for _, op := range ops {
		for _, from := range statuses {
			t.Run(op.name+"/from-"+from, func(t *testing.T) {
				o := openTestOutbox(t)
				enqueue(t, o, "m", "a", 1)
				o.db.MustExec("UPDATE outbox SET status = ?, attempts = 3 WHERE id = 'row-a'", from)
				before := state(t, o, "row-a")
				err := run(t, o.DB, func(tx *Tx) error { return op.apply(o, tx, "row-a") })
				allowed := false
				for _, f := range op.from {
					allowed = allowed || f == from
				}
				if !allowed {
					if !errors.Is(err, ErrStateChanged) || !strings.Contains(err.Error(), "status is "+from) {
						t.Fatalf("got %v, want ErrStateChanged naming status %s", err, from)
					}
					if after := state(t, o, "row-a"); !equalState(before, after) {
						t.Fatalf("refused transition changed the row: %+v -> %+v", before, after)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				op.check(t, state(t, o, "row-a"))
			})
		}
		t.Run(op.name+"/missing-row", func(t *testing.T) {
			o := openTestOutbox(t)
			err := run(t, o.DB, func(tx *Tx) error { return op.apply(o, tx, "nope") })
			if !errors.Is(err, ErrStateChanged) || !strings.Contains(err.Error(), "no such row") {
				t.Fatalf("got %v, want ErrStateChanged (no such row)", err)
			}
		})
	}
}

func equalState(a, b outboxState) bool {
	str := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	num := func(p *int64) int64 {
		if p == nil {
			return -1
		}
		return *p
	}
	return a.Status == b.Status && a.Attempts == b.Attempts && a.NextAttemptAt == b.NextAttemptAt &&
		str(a.LastError) == str(b.LastError) && num(a.DeliveredAt) == num(b.DeliveredAt) &&
		str(a.BrokerID) == str(b.BrokerID) && str(a.HistoryID) == str(b.HistoryID) && num(a.DeadAt) == num(b.DeadAt)
}

// TestDispatchCycle: claim, transient failure, reclaim, success.
func TestDispatchCycle(t *testing.T) {
	o := openTestOutbox(t)
	enqueue(t, o, "m", "a", 1)
	rows := claim(t, o, "m", 10, 1)
	if len(rows) != 1 || rows[0].Attempts != 1 {
		t.Fatalf("claim: %+v", rows)
	}
	next := 10 + Backoff(rows[0].Attempts, nil).Milliseconds()
	if err := run(t, o.DB, func(tx *Tx) error { return o.Retry(tx, "row-a", "5xx", next) }); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, o, "m", next-1, 1); len(got) != 0 {
		t.Fatal("claimed before its backoff ended")
	}
	rows = claim(t, o, "m", next, 1)
	if len(rows) != 1 || rows[0].Attempts != 2 {
		t.Fatalf("reclaim: %+v", rows)
	}
	if err := run(t, o.DB, func(tx *Tx) error { return o.MarkDone(tx, "row-a", "bm", "h", next+5) }); err != nil {
		t.Fatal(err)
	}
	// The §4.5 lookup now answers duplicate with the broker ids.
	res, err := accept(t, o, mustBegin(t, o.DB), "a", 1)
	if err != nil || res.Outcome != messages.AcceptDuplicate || *res.BrokerMessageID != "bm" || *res.HistoryID != "h" {
		t.Fatalf("accept after done: %+v %v", res, err)
	}
}

func mustBegin(t *testing.T, db *DB) *Batch {
	t.Helper()
	b, err := db.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Rollback)
	return b
}

func TestReleaseMesh(t *testing.T) {
	o := openTestOutbox(t)
	enqueue(t, o, "m", "a", 1)
	enqueue(t, o, "m", "b", 2)
	enqueue(t, o, "m", "p", 3)
	enqueue(t, o, "other", "x", 1)
	claim(t, o, "m", 2, 10)     // a, b inflight; p not yet due
	claim(t, o, "other", 5, 10) // x inflight
	var n int64
	if err := run(t, o.DB, func(tx *Tx) (err error) {
		n, err = o.ReleaseMesh(tx, "m", 50)
		return err
	}); err != nil || n != 2 {
		t.Fatalf("released %d (%v), want 2", n, err)
	}
	for _, id := range []string{"row-a", "row-b"} {
		if s := state(t, o, id); s.Status != "pending" || s.Attempts != 1 || s.NextAttemptAt != 50 {
			t.Fatalf("%s after release: %+v (no extra attempt, due now)", id, s)
		}
	}
	if s := state(t, o, "row-p"); s.NextAttemptAt != 3 || s.Attempts != 0 {
		t.Fatalf("pending row touched: %+v", s)
	}
	if s := state(t, o, "row-x"); s.Status != "inflight" {
		t.Fatalf("other mesh released: %+v", s)
	}
	if err := run(t, o.DB, func(tx *Tx) (err error) {
		n, err = o.ReleaseMesh(tx, "m", 60)
		return err
	}); err != nil || n != 0 {
		t.Fatalf("second release: %d (%v), want 0", n, err)
	}
}

func TestExpireOld(t *testing.T) {
	o := openTestOutbox(t)
	enqueue(t, o, "m", "old", 10)
	enqueue(t, o, "m", "edge", 100) // enqueued_at == olderThan: kept
	enqueue(t, o, "m", "young", 200)
	enqueue(t, o, "m", "oldinflight", 5)
	enqueue(t, o, "m", "olddone", 5)
	enqueue(t, o, "other", "otherold", 10)
	o.db.MustExec("UPDATE outbox SET status = 'inflight' WHERE id = 'row-oldinflight'")
	setStatus(t, o, "row-olddone", "done")
	var n int64
	if err := run(t, o.DB, func(tx *Tx) (err error) {
		n, err = o.ExpireOld(tx, "m", 100, 1000)
		return err
	}); err != nil || n != 1 {
		t.Fatalf("expired %d (%v), want 1", n, err)
	}
	s := state(t, o, "row-old")
	if s.Status != "dead" || s.LastError == nil || *s.LastError != ReasonMaxAge || s.DeadAt == nil || *s.DeadAt != 1000 {
		t.Fatalf("expired row: %+v", s)
	}
	for id, want := range map[string]string{"row-edge": "pending", "row-young": "pending",
		"row-oldinflight": "inflight", "row-olddone": "done", "row-otherold": "pending"} {
		if got := state(t, o, id).Status; got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
	}
	// An expired row is never claimed.
	if got := ids(claim(t, o, "m", 10_000, 10)); got != "edge,young" {
		t.Fatalf("claim after expiry = %q", got)
	}
}

func TestBackoff(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		attempts int
		want     time.Duration // without jitter
	}{
		{-3, 500 * ms}, {0, 500 * ms}, {1, 500 * ms}, {2, time.Second}, {3, 2 * time.Second},
		{4, 4 * time.Second}, {5, 8 * time.Second}, {6, 16 * time.Second}, {7, 30 * time.Second},
		{8, 30 * time.Second}, {64, 30 * time.Second}, {math.MaxInt, 30 * time.Second},
	} {
		if got := Backoff(c.attempts, nil); got != c.want {
			t.Errorf("Backoff(%d, nil) = %v, want %v", c.attempts, got, c.want)
		}
		if got := Backoff(c.attempts, func() float64 { return 0.5 }); got != c.want {
			t.Errorf("Backoff(%d, 0.5) = %v, want %v (jitter midpoint is no change)", c.attempts, got, c.want)
		}
		lo, hi := c.want*3/4, c.want*5/4
		minSeen, maxSeen := time.Duration(math.MaxInt64), time.Duration(0)
		for i := 0; i < 10_000; i++ {
			j := float64(i) / 10_000
			got := Backoff(c.attempts, func() float64 { return j })
			minSeen, maxSeen = min(minSeen, got), max(maxSeen, got)
		}
		if minSeen != lo || maxSeen >= hi || maxSeen < hi-hi/1000 {
			t.Errorf("Backoff(%d) over jitter [0,1): [%v, %v], want [%v, %v)", c.attempts, minSeen, maxSeen, lo, hi)
		}
	}
	for _, j := range []float64{-1, 1, 7, math.NaN(), math.Inf(1)} {
		if got := Backoff(1, func() float64 { return j }); got < 375*ms || got >= 625*ms {
			t.Errorf("out-of-range jitter %v gave %v", j, got)
		}
	}
}

// TestBeginRelaxed: a batch commits with synchronous=NORMAL (the fsync is
// SyncWAL's), the migrations having run with FULL.
func TestBeginRelaxed(t *testing.T) {
	o := openTestOutbox(t)
	for range 2 {
		b, err := o.Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var mode int
		err = b.Do(func(tx *Tx) error { return tx.Get(&mode, "PRAGMA synchronous") })
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		if err != nil || mode != 1 {
			t.Fatalf("synchronous = %d, %v; want 1 (NORMAL)", mode, err)
		}
	}
}

// TestCompactPayloads: done and aborted rows older than the cut lose their
// payload, at most limit a call; their id
// and fingerprint stay, so a retry of the id is still answered from the row.
func TestCompactPayloads(t *testing.T) {
	o := openTestOutbox(t)
	for _, cid := range []string{"done-old", "done-new", "aborted-old", "pending", "dead"} {
		enqueue(t, o, "m", cid, 100)
	}
	o.db.MustExec(`UPDATE outbox SET status = 'done', delivered_at = 100 WHERE client_message_id = 'done-old'`)
	o.db.MustExec(`UPDATE outbox SET status = 'done', delivered_at = 900 WHERE client_message_id = 'done-new'`)
	o.db.MustExec(`UPDATE outbox SET status = 'aborted', aborted_at = 100, aborted_by = 'operator' WHERE client_message_id = 'aborted-old'`)
	o.db.MustExec(`UPDATE outbox SET status = 'dead', dead_at = 100 WHERE client_message_id = 'dead'`)
	compact := func(limit int) int64 {
		t.Helper()
		var n int64
		if err := run(t, o.DB, func(tx *Tx) (err error) { n, err = o.CompactPayloads(tx, 500, limit); return err }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := compact(1); n != 1 {
		t.Fatalf("compacted %d with a limit of 1", n)
	}
	if n := compact(10); n != 1 {
		t.Fatalf("compacted %d on the second call, want the other old row", n)
	}
	if n := compact(10); n != 0 {
		t.Fatalf("compacted %d on the third call, want none left", n)
	}
	if n := count(t, o, `length(payload) = 0`); n != 2 {
		t.Fatalf("%d empty payloads, want done-old and aborted-old", n)
	}
	if n := count(t, o, `length(payload) = 0 AND client_message_id IN ('done-old', 'aborted-old')`); n != 2 {
		t.Fatal("the wrong rows lost their payload")
	}
	err := run(t, o.DB, func(tx *Tx) error {
		res, err := o.Accept(tx, &messages.AcceptSend{Mesh: "m", ClientMessageID: "done-old", RowID: "row-again",
			Fingerprint: messages.Fingerprint{1}, Payload: []byte(`{"id":"done-old"}`), Now: 1000}, false)
		if err == nil && (res.Inserted || res.Outcome != messages.AcceptDuplicate) {
			err = errors.New("a retry of a compacted row was not answered as its duplicate")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDrop: a dead or pending row is aborted by the operator with no
// successor; inflight, done and aborted rows are refused (409
// drop_not_eligible), an unknown row is 404; a refusal changes nothing.
func TestDrop(t *testing.T) {
	o := openTestOutbox(t)
	for _, cid := range []string{"dead", "pending", "inflight", "done"} {
		enqueue(t, o, "m", cid, 100)
		if cid != "pending" {
			o.db.MustExec(`UPDATE outbox SET status = ? WHERE client_message_id = ?`, cid, cid)
		}
	}
	drop := func(id string) (*messages.DropResult, error) {
		var res *messages.DropResult
		err := run(t, o.DB, func(tx *Tx) (err error) {
			res, err = o.Drop(tx, &messages.DropOutbox{ID: id, Now: 500})
			return err
		})
		return res, err
	}
	for _, cid := range []string{"dead", "pending"} {
		res, err := drop("row-" + cid)
		if err != nil || res.AbortedRowID != "row-"+cid || res.ClientMessageID != cid {
			t.Fatalf("drop %s: %+v, %v", cid, res, err)
		}
		if n := count(t, o, `client_message_id = '`+cid+`' AND status = 'aborted' AND aborted_by = 'operator'
			AND aborted_at = 500 AND superseded_by IS NULL`); n != 1 {
			t.Errorf("row %s after the drop is not aborted by the operator without successor", cid)
		}
	}
	for id, code := range map[string]string{"row-inflight": messages.CodeDropNotEligible, "row-done": messages.CodeDropNotEligible,
		"row-dead": messages.CodeDropNotEligible, "row-nosuch": messages.CodeRowNotFound} {
		var me *messages.Error
		if _, err := drop(id); !errors.As(err, &me) || me.Code != code {
			t.Errorf("drop %s: %v, want %s", id, err, code)
		}
	}
	if n := count(t, o, `status IN ('inflight', 'done')`); n != 2 {
		t.Errorf("refused drops changed rows: %d inflight or done left, want 2", n)
	}
}
