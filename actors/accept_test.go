package actors

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/metrics"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
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

// TestAcceptChildrenStop: after a burst of accepts for many ids, and many
// retries of one id, every accept child has stopped.
func TestAcceptChildrenStop(t *testing.T) {
	tree, _ := startTree(t)
	baseline := processes(tree.System)
	var wg sync.WaitGroup
	for i := 0; i < 400; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("id-%d", i%300)
			res, err := tree.System.Root.RequestFuture(tree.Accept, &messages.AcceptSend{Mesh: "m", ClientMessageID: id,
				RowID: fmt.Sprintf("row-%d", i), Fingerprint: messages.Fingerprint{1}, Payload: []byte("{}"), Now: 1}, 10*time.Second).Result()
			if r, ok := res.(*messages.AcceptResult); err != nil || !ok || r.Err != nil || r.Outcome != messages.AcceptQueued {
				t.Errorf("accept %s: %v %#v", id, err, res)
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for processes(tree.System) > baseline {
		if time.Now().After(deadline) {
			t.Fatalf("%d processes left, baseline %d: accept children do not stop", processes(tree.System), baseline)
		}
		time.Sleep(10 * time.Millisecond) // poll interval: the condition is re-checked
	}
}
