package actors

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/claudemesh/claudemesh-go/actors/metrics"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// commitsOf is how many commits (or syncs apart from one) of db the store
// has observed with the durability label.
func commitsOf(t *testing.T, m *metrics.Daemon, db, durability string) uint64 {
	t.Helper()
	var out dto.Metric
	if err := m.StoreCommit.WithLabelValues(db, durability).(prometheus.Metric).Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetHistogram().GetSampleCount()
}

// TestStoreFsyncModes: under strict an accept's batch commits durable;
// under batched_50ms it commits relaxed and one WAL sync follows within the
// delay; under off the sync waits for the store to stop, unless a strict
// commit's fsync covers it first. The mode changes between batches, as a
// reload does.
func TestStoreFsyncModes(t *testing.T) {
	m := metrics.New()
	policy := persistence.NewFsyncPolicy(persistence.FsyncStrict)
	system, store, _, _ := spawnStore(t, StoreOptions{Fsync: policy, Metrics: m})
	n := 0
	accept := func() {
		t.Helper()
		n++
		id := "fs-" + string(rune('a'+n))
		res, err := system.Root.RequestFuture(store, &messages.AcceptSend{Mesh: "m", ClientMessageID: id, RowID: "row-" + id,
			Fingerprint: messages.Fingerprint{1}, Payload: []byte(`{"type":"send","targetSpec":"#t"}`), Now: time.Now().UnixMilli()},
			5*time.Second).Result()
		if r, ok := res.(*messages.AcceptResult); err != nil || !ok || !r.Inserted {
			t.Fatalf("accept %s: %+v, %v", id, res, err)
		}
	}
	want := func(durable, relaxed, synced uint64) {
		t.Helper()
		if d, r, s := commitsOf(t, m, "outbox", "durable"), commitsOf(t, m, "outbox", "relaxed"), commitsOf(t, m, "outbox", walSync); d != durable || r != relaxed || s != synced {
			t.Fatalf("outbox commits durable %d, relaxed %d, wal syncs %d; want %d, %d, %d", d, r, s, durable, relaxed, synced)
		}
	}
	// waitSynced waits for the batched_50ms timer's sync.
	waitSynced := func(synced uint64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for commitsOf(t, m, "outbox", walSync) < synced {
			if time.Now().After(deadline) {
				t.Fatalf("no WAL sync within 5 s under batched_50ms")
			}
			time.Sleep(5 * time.Millisecond) // poll interval: the condition is re-checked
		}
	}

	accept()
	want(1, 0, 0)

	policy.Set(persistence.FsyncBatched)
	accept()
	waitSynced(1)
	want(1, 1, 1)

	policy.Set(persistence.FsyncOff)
	accept()
	want(1, 2, 1)
	policy.Set(persistence.FsyncStrict)
	accept() // its fsync covers the off-mode commit before it
	want(2, 2, 1)

	policy.Set(persistence.FsyncOff)
	accept()
	if err := system.Root.PoisonFuture(store).Wait(); err != nil {
		t.Fatal(err)
	}
	want(2, 3, 2) // the stop synced what was waiting
}

// TestStoreInboxSync: a batch that stores a message or appends an event
// commits inbox.db relaxed and fsyncs its WAL before the store answers (the
// inbox actor acks to the broker on that answer) — a dedupe hit too, whose
// ack rests on the earlier row being on disk; a read fsyncs nothing. The
// new row's event is published.
func TestStoreInboxSync(t *testing.T) {
	m := metrics.New()
	system, store, _, _ := spawnStore(t, StoreOptions{Metrics: m})
	events := make(chan messages.Event, 4)
	sink := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if p, ok := ctx.Message().(*messages.Publish); ok {
			events <- p.Event
		}
	}))
	system.Root.Send(store, &SetEvents{Events: sink})
	ask := func(msg any) any { t.Helper(); return askStore(t, system, store, msg) }
	want := func(relaxed, synced uint64) {
		t.Helper()
		if r, s := commitsOf(t, m, "inbox", "relaxed"), commitsOf(t, m, "inbox", walSync); r != relaxed || s != synced {
			t.Fatalf("inbox commits relaxed %d, wal syncs %d; want %d, %d", r, s, relaxed, synced)
		}
		if d := commitsOf(t, m, "inbox", "durable"); d != 0 {
			t.Fatalf("inbox commits durable %d, want 0", d)
		}
	}
	body := "hello"
	in := &messages.StoreInbound{Item: messages.InboxItem{ID: "r1", ClientMessageID: "c1", Mesh: "m", Kind: "dm",
		SenderPubkey: "p", SenderName: "n", Body: &body, ReceivedAtMs: time.Now().UnixMilli()}}
	if r := ask(in).(*messages.InboundStored); !r.Inserted {
		t.Fatalf("first store: %+v", r)
	}
	want(1, 1)
	select {
	case ev := <-events:
		if ev.Name != "message" {
			t.Fatalf("published %+v, want a message event", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event published within 5 s")
	}
	if r := ask(in).(*messages.InboundStored); r.Inserted || r.Event != nil {
		t.Fatalf("dedupe hit: %+v", r)
	}
	want(2, 2)
	ask(&messages.ListInbox{Limit: 10})
	want(3, 2)
	ask(&messages.AppendEvent{Name: "peer_join", Data: []byte(`{}`)})
	want(4, 3)
}

// askStore sends msg to the store and returns its reply, failing the test
// on no reply or a failed one.
func askStore(t *testing.T, system *actor.ActorSystem, store *actor.PID, msg any) any {
	t.Helper()
	res, err := system.Root.RequestFuture(store, msg, 5*time.Second).Result()
	if f, ok := res.(interface{ Failure() error }); err != nil || (ok && f.Failure() != nil) {
		t.Fatalf("%T: %+v, %v", msg, res, err)
	}
	return res
}

// TestStoreInboxSyncFails: when the inbox fsync fails, the message is
// committed (a reader may have seen it) but its store is answered with the
// error, so the inbox actor sends no client_ack and the broker pushes it
// again; the repeat is a dedupe hit, answered once its own fsync succeeds.
func TestStoreInboxSyncFails(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	var system *actor.ActorSystem
	var store *actor.PID
	var inbox *persistence.Inbox
	system, store, _, inbox = spawnStore(t, StoreOptions{syncInboxWAL: func() error {
		if failing.Load() {
			return errors.New("input/output error")
		}
		return inbox.DB.SyncWAL()
	}})
	body := "hello"
	in := &messages.StoreInbound{Item: messages.InboxItem{ID: "r1", ClientMessageID: "c1", Mesh: "m", Kind: "dm",
		SenderPubkey: "p", SenderName: "n", Body: &body, ReceivedAtMs: time.Now().UnixMilli()}}
	res, err := system.Root.RequestFuture(store, in, 5*time.Second).Result()
	if r, ok := res.(*messages.InboundStored); err != nil || !ok || r.Err == nil {
		t.Fatalf("store with a failing fsync: %+v, %v; want the error", res, err)
	}
	if page := askStore(t, system, store, &messages.ListInbox{Limit: 10}).(*messages.InboxPage); len(page.Items) != 1 {
		t.Fatalf("inbox after the failed fsync: %d rows, want the committed one", len(page.Items))
	}
	failing.Store(false)
	if r := askStore(t, system, store, in).(*messages.InboundStored); r.Inserted || r.Err != nil {
		t.Fatalf("the broker's repeat: %+v, want a dedupe hit", r)
	}
}
