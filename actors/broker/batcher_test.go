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
// passed, and run before the batcher stops or answers flushThen; the
// others run at once.
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
	// flushThen: the held h4 runs before the message goes out.
	system.Root.Send(pid, &batchOf[string]{req: "h4"})
	after := actor.NewFuture(system, 5*time.Second)
	system.Root.Send(pid, &flushThen{to: after.PID(), msg: "after"})
	if res, err := after.Result(); err != nil || res != "after" {
		t.Fatalf("flushThen sent %+v, %v", res, err)
	}
	select {
	case b := <-batches:
		if !slices.Equal(b, []string{"h4"}) {
			t.Fatalf("batch before flushThen's message %v, want h4", b)
		}
	default:
		t.Fatal("flushThen sent its message before running the held h4")
	}
	system.Root.Send(pid, &batchOf[string]{req: "h3"})
	if err := system.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if b := next(); !slices.Equal(b, []string{"h3"}) {
		t.Fatalf("batch at stop %v, want h3", b)
	}
}
