package actors

import (
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/transport/ipc/metrics"
)

// TestStoreRetention: the retention commands prune inbox rows past their
// days, trim the event log and empty the payloads of old done rows, at most
// their limit a call (More says there is more); a pass started by the timer
// goes on until nothing is left, and keeps what is young.
func TestStoreRetention(t *testing.T) {
	m := metrics.New()
	system, store, outbox, inbox := spawnStore(t, StoreOptions{Retention: messages.Retention{InboxDays: 30, OutboxDays: 7}, Metrics: m})
	ask := func(msg any) any { t.Helper(); return askStore(t, system, store, msg) }
	now := time.Now()
	old, young := now.Add(-40*24*time.Hour), now.Add(-time.Hour)
	for _, at := range []time.Time{old, young} { // in time order, as events are appended
		for i := range 5 {
			id := fmt.Sprintf("%d-%d", at.Unix(), i)
			body := "b"
			ask(&messages.StoreInbound{Item: messages.InboxItem{ID: id, ClientMessageID: "c" + id, Mesh: "m", Kind: "topic",
				SenderPubkey: "p", SenderName: "n", Body: &body, ReceivedAtMs: at.UnixMilli()}})
			ask(&messages.AcceptSend{Mesh: "m", ClientMessageID: "o" + id, RowID: "r" + id, Fingerprint: messages.Fingerprint{1},
				Payload: []byte(`{"type":"send"}`), Now: at.UnixMilli()})
		}
	}
	db := sqlx.MustOpen("sqlite", "file:"+outbox.Path()+"?_pragma=busy_timeout(5000)")
	defer db.Close()
	db.MustExec(`UPDATE outbox SET status = 'done', delivered_at = enqueued_at`)
	count := func(q string) int {
		t.Helper()
		var n int
		if err := db.Get(&n, q); err != nil {
			t.Fatal(err)
		}
		return n
	}
	inboxRows := func() int {
		t.Helper()
		page := ask(&messages.ListInbox{Limit: 100}).(*messages.InboxPage)
		return len(page.Items)
	}

	// Direct commands with a limit of 2.
	p := ask(&messages.PruneOutbox{Before: now.Add(-7 * 24 * time.Hour).UnixMilli(), Limit: 2}).(*messages.Pruned)
	if p.Outbox != 2 || !p.More {
		t.Fatalf("outbox pass with a limit of 2: %+v", p)
	}
	p = ask(&messages.PruneInbox{Before: now.Add(-30 * 24 * time.Hour).UnixMilli(), EventsKeep: 7, Limit: 2}).(*messages.Pruned)
	if p.Inbox != 2 || p.Events != 2 || !p.More {
		t.Fatalf("inbox pass with a limit of 2: %+v", p)
	}

	value := func(c prometheus.Collector) float64 {
		t.Helper()
		var out dto.Metric
		if err := c.(prometheus.Metric).Write(&out); err != nil {
			t.Fatal(err)
		}
		if out.Gauge != nil {
			return out.GetGauge().GetValue()
		}
		return out.GetCounter().GetValue()
	}
	// The timer's pass goes on, a batch after another, until nothing is left.
	system.Root.Send(store, &retentionTick{})
	if err := wait.Until(10*time.Second, "the retention pass", func() bool {
		return count(`SELECT COUNT(*) FROM outbox WHERE length(payload) = 0`) >= 5 && inboxRows() <= 5 &&
			value(m.InboxRows) == 5 && value(m.Pruned.WithLabelValues("outbox_payloads")) == 3
	}); err != nil {
		t.Fatalf("%v: %d empty payloads, %d inbox rows, gauge %v, payloads counted %v; want 5, 5, 5, 3", err,
			count(`SELECT COUNT(*) FROM outbox WHERE length(payload) = 0`), inboxRows(), value(m.InboxRows),
			value(m.Pruned.WithLabelValues("outbox_payloads")))
	}
	if n := count(`SELECT COUNT(*) FROM outbox`); n != 10 {
		t.Errorf("%d outbox rows after the pass, want all 10 (ids are never released)", n)
	}
	if n := count(`SELECT COUNT(*) FROM outbox WHERE length(payload) = 0 AND enqueued_at > ` + fmt.Sprint(old.UnixMilli())); n != 0 {
		t.Errorf("%d young rows lost their payload", n)
	}
	// A retry of a compacted id is still its duplicate.
	res := ask(&messages.AcceptSend{Mesh: "m", ClientMessageID: fmt.Sprintf("o%d-0", old.Unix()), RowID: "again",
		Fingerprint: messages.Fingerprint{1}, Payload: []byte(`{"type":"send"}`), Now: now.UnixMilli()}).(*messages.AcceptResult)
	if res.Inserted || res.Outcome != messages.AcceptDuplicate {
		t.Errorf("retry of a compacted id: %+v", res)
	}
	idb := sqlx.MustOpen("sqlite", "file:"+inbox.Path()+"?_pragma=busy_timeout(5000)")
	defer idb.Close()
	var stale, kept int
	cut := now.Add(-persistence.DefaultEventsMaxAge).UnixMilli()
	if err := idb.Get(&stale, "SELECT COUNT(*) FROM events WHERE created_at < ?", cut); err != nil || stale != 0 {
		t.Errorf("%d events older than the log's age bound after the pass (%v)", stale, err)
	}
	if err := idb.Get(&kept, "SELECT COUNT(*) FROM events"); err != nil || kept != 5 {
		t.Errorf("%d events after the pass, want the 5 young ones (%v)", kept, err)
	}
	// The pass also counted the rows left (5), what it let go (the 3 payloads
	// the direct command left; its own answer went to the test) and the size.
	if bytes := value(m.InboxBytes); bytes <= 0 {
		t.Errorf("cm_daemon_inbox_bytes %v, want the file's size", bytes)
	}
}

// TestStoreRetentionPrunesAudit: the outbox's retention pass also lets go
// of the audit entries older than its window, oldest first, never the
// newest, and the log records the pass.
func TestStoreRetentionPrunesAudit(t *testing.T) {
	system, store, outbox, _ := spawnStore(t, StoreOptions{})
	now := time.Now()
	for _, id := range []string{"a", "b", "c"} {
		askStore(t, system, store, &messages.AcceptSend{Mesh: "m", ClientMessageID: id, RowID: "r" + id,
			Fingerprint: messages.Fingerprint{1}, Payload: []byte(`{"type":"send"}`), Now: now.UnixMilli()})
	}
	db := sqlx.MustOpen("sqlite", "file:"+outbox.Path()+"?_pragma=busy_timeout(5000)")
	defer db.Close()
	db.MustExec(`UPDATE audit SET at = ? WHERE seq <= 2`, now.Add(-8*24*time.Hour).UnixMilli())

	p := askStore(t, system, store, &messages.PruneOutbox{Before: now.Add(-7 * 24 * time.Hour).UnixMilli(), Limit: 10}).(*messages.Pruned)
	if p.Err != nil || p.Audit != 2 || p.More {
		t.Fatalf("outbox pass: %+v", p)
	}
	page := askStore(t, system, store, &messages.ListAudit{Limit: 10}).(*messages.AuditPage)
	var got []string
	for _, e := range page.Entries {
		got = append(got, fmt.Sprintf("%d %s %s", e.Seq, e.Kind, e.Subject))
	}
	if want := "[3 outbox.accepted c 4 audit.pruned audit]"; fmt.Sprint(got) != want {
		t.Fatalf("audit log after the pass: %v, want %s", got, want)
	}
	if _, err := messages.VerifyAudit(nil, page.Entries); err != nil {
		t.Fatalf("the entries kept: %v", err)
	}
}
