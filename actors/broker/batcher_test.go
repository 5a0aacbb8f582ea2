package broker

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// TestBatcherHolds: requests the batcher holds (their results go to no one)
// join the next batch of other requests, run on their own once holdFor has
// passed, and run before the batcher stops; the others run at once.
func TestBatcherHolds(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	batches := make(chan []string, 16)
	run := func(reqs []string) []string {
		batches <- slices.Clone(reqs)
		return reqs
	}
	held := func(r string) bool { return r[0] == 'h' }
	pid := system.Root.Spawn(actor.PropsFromProducer(newBatcher("test", 64, run, held, 50*time.Millisecond,
		slog.New(slog.NewTextHandler(io.Discard, nil)))))
	next := func() []string {
		t.Helper()
		select {
		case b := <-batches:
			slices.Sort(b)
			return b
		case <-time.After(5 * time.Second):
			t.Fatal("no batch ran")
			return nil
		}
	}

	system.Root.Send(pid, &batchOf[string]{req: "h1"})
	res, err := system.Root.RequestFuture(pid, &batchOf[string]{req: "a1"}, 5*time.Second).Result()
	if r, ok := res.(*batchResult[string]); err != nil || !ok || r.res != "a1" {
		t.Fatalf("a1 answered %+v, %v", res, err)
	}
	if b := next(); !slices.Equal(b, []string{"a1", "h1"}) {
		t.Fatalf("first batch %v, want the held h1 with a1", b)
	}
	system.Root.Send(pid, &batchOf[string]{req: "h2"})
	if b := next(); !slices.Equal(b, []string{"h2"}) {
		t.Fatalf("batch %v, want h2 alone once holdFor passed", b)
	}
	system.Root.Send(pid, &batchOf[string]{req: "h3"})
	if err := system.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if b := next(); !slices.Equal(b, []string{"h3"}) {
		t.Fatalf("batch at stop %v, want h3", b)
	}
}
