package actors

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/transport/ipc/metrics"
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

// TestStoreFsyncModes: every accept's batch commits relaxed; under strict
// the outbox syncer's WAL fsync comes before the answer; under
// batched_50ms one follows within the delay; under off the sync waits for
// the store to stop, unless a strict batch's fsync covers it first. The
// mode changes between batches, as a reload does.
func TestStoreFsyncModes(t *testing.T) {
	m := metrics.New()
	policy := config.NewFsyncPolicy(config.FsyncStrict)
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
	want := func(relaxed, synced uint64) {
		t.Helper()
		if r, s := commitsOf(t, m, "outbox", "relaxed"), commitsOf(t, m, "outbox", walSync); r != relaxed || s != synced {
			t.Fatalf("outbox commits relaxed %d, wal syncs %d; want %d, %d", r, s, relaxed, synced)
		}
	}
	// waitSynced waits for the batched_50ms timer's sync.
	waitSynced := func(synced uint64) {
		t.Helper()
		wait.For(t, 5*time.Second, "a WAL sync under batched_50ms", func() bool { return commitsOf(t, m, "outbox", walSync) >= synced })
	}

	accept()
	want(1, 1)

	policy.Set(config.FsyncBatched)
	accept()
	waitSynced(2)
	want(2, 2)

	policy.Set(config.FsyncOff)
	accept()
	want(3, 2)
	policy.Set(config.FsyncStrict)
	accept() // its fsync covers the off-mode commit before it
	want(4, 3)

	policy.Set(config.FsyncOff)
	accept()
	if err := system.Root.PoisonFuture(store).Wait(); err != nil {
		t.Fatal(err)
	}
	want(5, 4) // the stop synced what was waiting
}

// TestStoreInboxSync: a batch that stores a message or appends an event
// commits inbox.db relaxed and fsyncs its WAL before the store answers (the
// inbox actor acks to the broker on that answer) — a dedupe hit too, whose
// ack rests on the earlier row being on disk; a read fsyncs nothing. The
// new row's event is published, with the mesh its data names.
func TestStoreInboxSync(t *testing.T) {
	m := metrics.New()
	system := NewSystem(slog.New(slog.NewTextHandler(io.Discard, nil)))
	events := make(chan messages.Event, 4)
	sink := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if p, ok := ctx.Message().(*messages.Publish); ok {
			events <- p.Event
		}
	}))
	_, store, _, _ := spawnStoreIn(t, system, StoreOptions{Metrics: m, Events: sink})
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
		if ev.Name != "message" || ev.Mesh != "m" || ev.Mesh != messages.EventMesh(ev.Data) {
			t.Fatalf("published %+v, want a message event of mesh m, as its data says", ev)
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
// again. From then on no fsync is trusted: the repeat is answered with the
// error too, though the disk works again, and the store reports inbox.db's
// fsyncs broken (GET /v1/health) until the daemon restarts.
func TestStoreInboxSyncFails(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	var system *actor.ActorSystem
	var store *actor.PID
	var inbox *persistence.Inbox
	system, store, _, inbox = spawnStore(t, StoreOptions{Faults: &Faults{SyncInboxWAL: func() error {
		if failing.Load() {
			return errors.New("input/output error")
		}
		return inbox.DB.SyncWAL()
	}}})
	body := "hello"
	in := &messages.StoreInbound{Item: messages.InboxItem{ID: "r1", ClientMessageID: "c1", Mesh: "m", Kind: "dm",
		SenderPubkey: "p", SenderName: "n", Body: &body, ReceivedAtMs: time.Now().UnixMilli()}}
	stored := func() *messages.InboundStored {
		t.Helper()
		res, err := system.Root.RequestFuture(store, in, 5*time.Second).Result()
		r, ok := res.(*messages.InboundStored)
		if err != nil || !ok {
			t.Fatalf("store: %+v, %v", res, err)
		}
		return r
	}
	if r := stored(); r.Err == nil {
		t.Fatalf("store with a failing fsync: %+v; want the error", r)
	}
	if page := askStore(t, system, store, &messages.ListInbox{Limit: 10}).(*messages.InboxPage); len(page.Items) != 1 {
		t.Fatalf("inbox after the failed fsync: %d rows, want the committed one", len(page.Items))
	}
	failing.Store(false)
	if r := stored(); r.Inserted || r.Err == nil || !strings.Contains(r.Err.Error(), "input/output error") {
		t.Fatalf("the broker's repeat after the disk came back: %+v; want the first failure", r)
	}
	if c := askStore(t, system, store, &messages.OutboxStats{}).(*messages.OutboxCounts); !strings.HasPrefix(c.SyncBroken, "inbox: ") {
		t.Fatalf("sync broken = %q, want inbox.db's", c.SyncBroken)
	}
}

// heldSync is an outbox WAL sync that waits for the test: each call says
// so on began and returns what release gives it (nil: the real fsync).
type heldSync struct {
	began   chan struct{}
	release chan error
	done    chan struct{} // closed at cleanup: every call returns
}

func holdOutboxSync() (*heldSync, StoreOptions, **persistence.Outbox) {
	h := &heldSync{began: make(chan struct{}, 8), release: make(chan error), done: make(chan struct{})}
	outbox := new(*persistence.Outbox)
	return h, StoreOptions{Faults: &Faults{SyncOutboxWAL: func() error {
		h.began <- struct{}{}
		select {
		case err := <-h.release:
			if err != nil {
				return err
			}
		case <-h.done:
		}
		return (*outbox).DB.SyncWAL()
	}}}, outbox
}

// wait waits for a sync to begin.
func (h *heldSync) wait(t *testing.T) {
	t.Helper()
	select {
	case <-h.began:
	case <-time.After(5 * time.Second):
		t.Fatal("no outbox WAL sync began within 5 s")
	}
}

// acceptFuture asks the store to accept id (a topic send) without waiting.
func acceptFuture(system *actor.ActorSystem, store *actor.PID, id string) *actor.Future {
	return system.Root.RequestFuture(store, &messages.AcceptSend{Mesh: "m", ClientMessageID: id, RowID: "row-" + id,
		Fingerprint: messages.Fingerprint{1}, Payload: []byte(`{"type":"send","targetSpec":"#t"}`), Now: time.Now().UnixMilli()},
		5*time.Second)
}

func acceptResult(t *testing.T, f *actor.Future) *messages.AcceptResult {
	t.Helper()
	res, err := f.Result()
	r, ok := res.(*messages.AcceptResult)
	if err != nil || !ok {
		t.Fatalf("accept: %+v, %v", res, err)
	}
	return r
}

// TestStoreClaimedBeforeFsync: under strict an accepted row goes to the
// dispatcher as soon as its commit is visible, while the WAL fsync runs,
// and the caller's answer waits for the fsync. If the fsync fails, the
// caller is answered 503 store_unavailable, the store reports outbox.db's
// fsyncs broken, and later sends are refused 503 daemon_degraded.
func TestStoreClaimedBeforeFsync(t *testing.T) {
	held, opts, outbox := holdOutboxSync()
	system, store, ob, _ := spawnStore(t, opts)
	*outbox = ob
	t.Cleanup(func() { close(held.done) }) // before the system shuts down
	got := make(chan any, 8)
	system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &probe{store: store, got: got, ready: &messages.DispatchReady{Mesh: "m", Gen: 1, Window: 4, Now: time.Now().UnixMilli()}}
	}))
	next := func() any { t.Helper(); return probed(t, got) }
	if m, ok := next().(*messages.OutcomeApplied); !ok || m.Err != nil {
		t.Fatalf("DispatchReady answered %+v", m)
	}

	first := acceptFuture(system, store, "x1")
	held.wait(t)
	c, ok := next().(*messages.ClaimedRows)
	if !ok || len(c.Rows) != 1 || c.Rows[0].ClientMessageID != "x1" {
		t.Fatalf("while the fsync runs the dispatcher got %+v, want the claim of x1", c)
	}
	held.release <- errors.New("input/output error")
	var me *messages.Error
	if r := acceptResult(t, first); !errors.As(r.Err, &me) || me.Status != 503 || me.Code != messages.CodeUnavailable {
		t.Fatalf("accept whose fsync failed: %+v, want 503 %s", r, messages.CodeUnavailable)
	}
	if c := askStore(t, system, store, &messages.OutboxStats{}).(*messages.OutboxCounts); !strings.HasPrefix(c.SyncBroken, "outbox: ") {
		t.Fatalf("sync broken = %q, want outbox.db's", c.SyncBroken)
	}
	// No fsync is trusted after a failed one: sends are refused, at once,
	// until the daemon restarts.
	if r := acceptResult(t, acceptFuture(system, store, "x2")); !errors.As(r.Err, &me) || me.Status != 503 ||
		me.Code != messages.CodeDegraded {
		t.Fatalf("a send after the failed fsync: %+v, want 503 %s", r, messages.CodeDegraded)
	}
}

// TestStoreStrictBatchesWait: while an accept's fsync runs, an accept
// whose row would go out at once (its mesh's dispatcher has room) commits
// at once and waits for the next fsync; one whose row would not (mesh m2
// has no dispatcher) waits, uncommitted, as do all of them while two
// batches wait for an fsync; once the running fsync is done they commit
// together, under one fsync.
func TestStoreStrictBatchesWait(t *testing.T) {
	held, opts, outbox := holdOutboxSync()
	system, store, ob, _ := spawnStore(t, opts)
	*outbox = ob
	t.Cleanup(func() { close(held.done) })
	got := make(chan any, 8)
	system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &probe{store: store, got: got, ready: &messages.DispatchReady{Mesh: "m", Gen: 1, Window: 8, Now: time.Now().UnixMilli()}}
	}))
	if m, ok := probed(t, got).(*messages.OutcomeApplied); !ok || m.Err != nil {
		t.Fatalf("DispatchReady answered %+v", m)
	}
	committed := func() map[string]bool {
		t.Helper()
		page := askStore(t, system, store, &messages.ListOutbox{Limit: 10}).(*messages.OutboxPage)
		ids := map[string]bool{}
		for _, it := range page.Items {
			ids[it.ClientMessageID] = true
		}
		return ids
	}
	accept := func(mesh, id string) *actor.Future {
		return system.Root.RequestFuture(store, &messages.AcceptSend{Mesh: mesh, ClientMessageID: id, RowID: "row-" + id,
			Fingerprint: messages.Fingerprint{1}, Payload: []byte(`{"type":"send","targetSpec":"#t"}`), Now: time.Now().UnixMilli()},
			5*time.Second)
	}
	first := accept("m", "y0")
	held.wait(t) // y0's fsync runs
	later := []*actor.Future{accept("m2", "z1"), accept("m", "y1")}
	if ids := committed(); !ids["y0"] || !ids["y1"] || ids["z1"] {
		t.Fatalf("committed during y0's fsync: %v, want y0 and y1 (its row goes out), not z1", ids)
	}
	later = append(later, accept("m", "y2"), accept("m", "y3"))
	if ids := committed(); ids["y2"] || ids["y3"] {
		t.Fatalf("committed while two batches wait for an fsync: %v, want neither y2 nor y3", ids)
	}
	held.release <- nil
	if r := acceptResult(t, first); r.Err != nil || !r.Inserted {
		t.Fatalf("y0: %+v", r)
	}
	held.wait(t) // the next fsync began: the store was told the first is done
	if ids := committed(); !ids["z1"] || !ids["y2"] || !ids["y3"] {
		t.Fatalf("committed after y0's fsync: %v, want z1, y2 and y3 too", ids)
	}
	go func() { // this fsync and any after it
		for {
			select {
			case held.release <- nil:
			case <-held.done:
				return
			}
			select {
			case <-held.began:
			case <-held.done:
				return
			}
		}
	}()
	for i, f := range later {
		if r := acceptResult(t, f); r.Err != nil || !r.Inserted {
			t.Fatalf("accept %d: %+v", i, r)
		}
	}
}

// TestStorePanicAfterCommit: a batch that fails after its commit has
// handed outbox.db's replies to the syncer answers those commands once,
// from the syncer, with what the commit stored — not first with the
// panic — and the rows it committed inflight still go to the dispatcher.
func TestStorePanicAfterCommit(t *testing.T) {
	faults := &Faults{}
	system, store, _, _ := spawnStore(t, StoreOptions{Faults: faults})
	got := make(chan any, 8)
	system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &probe{store: store, got: got, ready: &messages.DispatchReady{Mesh: "m", Gen: 1, Window: 4, Now: time.Now().UnixMilli()}}
	}))
	if m, ok := probed(t, got).(*messages.OutcomeApplied); !ok || m.Err != nil {
		t.Fatalf("DispatchReady answered %+v", m)
	}
	faults.StorePanic.Store(true)
	replies := make(chan any, 4)
	probe := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *messages.AcceptSend:
			ctx.Request(store, m)
		case *messages.AcceptResult, *messages.Error, error:
			replies <- m
		}
	}))
	accept := func(id string) any {
		t.Helper()
		system.Root.Send(probe, &messages.AcceptSend{Mesh: "m", ClientMessageID: id, RowID: "row-" + id,
			Fingerprint: messages.Fingerprint{1}, Payload: []byte(`{"type":"send","targetSpec":"#t"}`), Now: time.Now().UnixMilli()})
		select {
		case r := <-replies:
			return r
		case <-time.After(5 * time.Second):
			t.Fatalf("no answer to %s within 5 s", id)
			return nil
		}
	}
	if r, ok := accept("panics").(*messages.AcceptResult); !ok || !r.Inserted {
		t.Fatalf("the batch that panicked after its commit was first answered %#v, want its insert", r)
	}
	// The syncer answers once the fsync is done, which may be before the
	// store's own goroutine reaches its injected panic.
	wait.For(t, 5*time.Second, "the store to panic", func() bool { return !faults.StorePanic.Load() })
	if c, ok := probed(t, got).(*messages.ClaimedRows); !ok || len(c.Rows) != 1 || c.Rows[0].ClientMessageID != "panics" {
		t.Fatalf("the dispatcher got %+v, want the row of the batch that panicked", c)
	}
	if r, ok := accept("after").(*messages.AcceptResult); !ok || !r.Inserted {
		t.Fatalf("the next accept: %#v", r)
	}
	if r, ok := accept("panics").(*messages.AcceptResult); !ok || r.Inserted || r.Outcome == messages.AcceptConflict {
		t.Fatalf("a retry of the batch that panicked: %#v, want its stored row found", r)
	}
}
