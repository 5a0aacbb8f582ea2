package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/transport/ipc/metrics"
)

// startTree starts the daemon's actor tree on real SQLite files in a temp
// directory, with the given meshes; fatal receives what would stop the
// daemon.
func startTree(t *testing.T, meshes ...MeshConfig) (tree *Tree, fatal chan error) {
	t.Helper()
	tree, fatal, _ = openTree(t, nil, meshes...)
	return tree, fatal
}

// openTree is startTree with faults injected, that also returns the
// outbox, for a test that reads it after the store has stopped.
func openTree(t *testing.T, faults *Faults, meshes ...MeshConfig) (tree *Tree, fatal chan error, outbox *persistence.Outbox) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	outbox, inbox := openStores(t, log)
	fatal = make(chan error, 1)
	tree, err := Start(NewSystem(log), Deps{Outbox: outbox, Inbox: inbox, Meshes: meshes, Log: log, Fatal: fatal, Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tree.System.Root.PoisonFuture(tree.Root).Wait()
		tree.System.Shutdown()
		outbox.Close()
		inbox.Close()
	})
	return tree, fatal, outbox
}

// openStores opens outbox.db and inbox.db in a fresh directory; the caller
// closes them once nothing uses them.
func openStores(t *testing.T, log *slog.Logger) (*persistence.Outbox, *persistence.Inbox) {
	t.Helper()
	dir := t.TempDir()
	outbox, err := persistence.OpenOutbox(context.Background(), filepath.Join(dir, "outbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	inboxDB, err := persistence.OpenInbox(context.Background(), filepath.Join(dir, "inbox.db"), log)
	if err != nil {
		t.Fatal(err)
	}
	inbox, err := persistence.NewInbox(inboxDB)
	if err != nil {
		t.Fatal(err)
	}
	return outbox, inbox
}

// outboxRows lists the tree's outbox rows of a status ("": every status),
// by client_message_id.
func outboxRows(t *testing.T, tree *Tree, status string) map[string]messages.OutboxItem {
	t.Helper()
	res, err := tree.System.Root.RequestFuture(tree.Store, &messages.ListOutbox{Status: status, Limit: 100}, 5*time.Second).Result()
	page, ok := res.(*messages.OutboxPage)
	if err != nil || !ok || page.Err != nil {
		t.Fatalf("list outbox: %+v, %v", res, err)
	}
	out := map[string]messages.OutboxItem{}
	for _, it := range page.Items {
		out[it.ClientMessageID] = it
	}
	return out
}

// spawnStore starts a store actor alone, on databases in a fresh
// directory, with o's other options (a fresh metrics set if none); all of
// it goes when the test ends.
func spawnStore(t *testing.T, o StoreOptions) (*actor.ActorSystem, *actor.PID, *persistence.Outbox, *persistence.Inbox) {
	t.Helper()
	return spawnStoreIn(t, NewSystem(slog.New(slog.NewTextHandler(io.Discard, nil))), o)
}

// spawnStoreIn is spawnStore in a system the test made (to spawn the
// store's events actor first, say).
func spawnStoreIn(t *testing.T, system *actor.ActorSystem, o StoreOptions) (*actor.ActorSystem, *actor.PID, *persistence.Outbox, *persistence.Inbox) {
	t.Helper()
	o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	o.Outbox, o.Inbox = openStores(t, o.Log)
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	t.Cleanup(func() {
		system.Shutdown()
		o.Outbox.Close()
		o.Inbox.Close()
	})
	return system, system.Root.Spawn(actor.PropsFromProducer(NewStore(o))), o.Outbox, o.Inbox
}

func processes(s *actor.ActorSystem) int {
	n := 0
	for _, m := range s.ProcessRegistry.LocalPIDs.LocalPIDs {
		n += m.Count()
	}
	return n
}

// TestAcceptChildrenReusedAndStopped: accepts of new ids one after the
// other are served by one reused child, not one spawned per id; after a
// burst of accepts for many ids, and many retries of one id, every child
// is stopped once idle for its time.
func TestAcceptChildrenReusedAndStopped(t *testing.T) {
	tree, _ := startTree(t)
	root := tree.System.Root
	router := root.Spawn(workers.Props(newAcceptRouter(tree.Store, slog.New(slog.NewTextHandler(io.Discard, nil)),
		acceptTimings{idle: 200 * time.Millisecond, store: StoreTimeout})))
	baseline := processes(tree.System)
	accept := func(id, row string) {
		res, err := root.RequestFuture(router, &messages.AcceptSend{Mesh: "m", ClientMessageID: id, RowID: row,
			Fingerprint: messages.Fingerprint{1}, Payload: []byte("{}"), Now: 1}, 10*time.Second).Result()
		if r, ok := res.(*messages.AcceptResult); err != nil || !ok || r.Err != nil || r.Outcome != messages.AcceptQueued {
			t.Errorf("accept %s: %v %#v", id, err, res)
		}
	}
	most := 0
	for i := range 50 {
		accept(fmt.Sprintf("seq-%d", i), fmt.Sprintf("seq-row-%d", i))
		most = max(most, processes(tree.System)-baseline)
	}
	if most > 3 { // the child, and the future of the request in flight
		t.Errorf("%d processes above the baseline for 50 accepts one after the other: children are not reused", most)
	}
	var wg sync.WaitGroup
	for i := 0; i < 400; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			accept(fmt.Sprintf("id-%d", i%300), fmt.Sprintf("row-%d", i))
		}()
	}
	wg.Wait()
	if err := wait.Until(5*time.Second, "the accept children to stop", func() bool { return processes(tree.System) <= baseline }); err != nil {
		t.Fatalf("%v: %d processes left, baseline %d", err, processes(tree.System), baseline)
	}
}

// TestAcceptStuckStore: when the store does not answer in time the caller
// gets 503 store_unavailable, and the next request for the id goes to
// another child; the store's late answer to the first is not taken for the
// answer to the second.
func TestAcceptStuckStore(t *testing.T) {
	system := NewSystem(slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer system.Shutdown()
	type asked struct {
		msg  *messages.AcceptSend
		from *actor.PID
	}
	got := make(chan asked, 4)
	store := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*messages.AcceptSend); ok {
			got <- asked{m, ctx.Sender()}
		}
	}))
	router := system.Root.Spawn(workers.Props(newAcceptRouter(store, slog.New(slog.NewTextHandler(io.Discard, nil)),
		acceptTimings{idle: time.Minute, store: 100 * time.Millisecond})))
	first := system.Root.RequestFuture(router, &messages.AcceptSend{ClientMessageID: "x", RowID: "r1"}, 5*time.Second)
	second := system.Root.RequestFuture(router, &messages.AcceptSend{ClientMessageID: "x", RowID: "r2"}, 5*time.Second)
	next := func() asked {
		t.Helper()
		select {
		case a := <-got:
			return a
		case <-time.After(5 * time.Second):
			t.Fatal("the store was not asked")
			return asked{}
		}
	}
	a1 := next()
	if a1.msg.RowID != "r1" {
		t.Fatalf("first asked %s", a1.msg.RowID)
	}
	res, err := first.Result()
	if r, ok := res.(*messages.AcceptResult); err != nil || !ok || !errors.Is(r.Err, messages.ErrStoreUnavailable) {
		t.Fatalf("first: %#v, %v; want store unavailable", res, err)
	}
	a2 := next()
	if a2.msg.RowID != "r2" || a2.from.Equal(a1.from) {
		t.Fatalf("second asked %s by %v (first by %v): want r2 from another child", a2.msg.RowID, a2.from, a1.from)
	}
	system.Root.Send(a1.from, &messages.AcceptResult{Outcome: messages.AcceptDuplicate}) // late
	system.Root.Send(a2.from, &messages.AcceptResult{Outcome: messages.AcceptQueued, Inserted: true})
	res, err = second.Result()
	if r, ok := res.(*messages.AcceptResult); err != nil || !ok || r.Outcome != messages.AcceptQueued {
		t.Fatalf("second: %#v, %v; want its own answer", res, err)
	}
}
