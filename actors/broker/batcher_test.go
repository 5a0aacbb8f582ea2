package broker

import (
	"errors"
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
	pid := system.Root.Spawn(actor.PropsFromProducer(newBatcher("test", 64, run, held, 50*time.Millisecond, nil,
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

// TestBatcherDurability: with a durability, a batch's results wait for a
// sync that began after its commit, the next batch runs meanwhile, and
// once a sync has failed every result is the failure's, later ones too,
// and the durability says it is broken.
func TestBatcherDurability(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	syncing, release := make(chan struct{}, 16), make(chan error)
	ran := make(chan string, 16)
	pid, d := durableBatcher(system, ran, func() error {
		syncing <- struct{}{}
		return <-release
	}, 0)
	wait := func(ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("no sync began")
		}
	}
	answer := func(done <-chan any) string {
		t.Helper()
		res := <-done
		r, ok := res.(*batchResult[string])
		if !ok {
			t.Fatalf("answered %+v", res)
		}
		return r.res
	}

	a := ask(system, pid, "a")
	wait(syncing) // a committed; its sync is under way
	if got := <-ran; got != "a" {
		t.Fatalf("ran %q, want a", got)
	}
	b := ask(system, pid, "b")
	if got := <-ran; got != "b" { // the next batch commits while a's sync lasts
		t.Fatalf("ran %q, want b", got)
	}
	select {
	case res := <-a:
		t.Fatalf("a answered %v before its sync returned", res)
	default:
	}
	release <- nil
	if got := answer(a); got != "a" {
		t.Fatalf("a answered %q", got)
	}
	wait(syncing) // b's own sync: it committed after a's began
	release <- errors.New("disk on fire")
	if got := answer(b); got != "b: disk on fire" {
		t.Fatalf("b answered %q, want its failure", got)
	}
	if d.brokenBy() == nil {
		t.Fatal("the failed sync is not reported (the broker's /health reads it)")
	}
	c := ask(system, pid, "c")
	<-ran
	if got := answer(c); got != "c: disk on fire" { // no later sync is trusted
		t.Fatalf("c answered %q after a failed sync", got)
	}
	select {
	case <-syncing:
		t.Fatal("synced again after a failure")
	default:
	}
}

// durableBatcher spawns a batcher of strings whose batches sync with sync
// after delay; ran gets each request as its batch runs, and a request's
// result is itself (or itself and the failure).
func durableBatcher(system *actor.ActorSystem, ran chan<- string, sync func() error, delay time.Duration) (*actor.PID, *durability[string]) {
	run := func(reqs []string) []string {
		for _, r := range reqs {
			ran <- r
		}
		return reqs
	}
	d := &durability[string]{sync: sync, delay: delay, failed: func(r string, err error) string { return r + ": " + err.Error() }}
	return system.Root.Spawn(actor.PropsFromProducer(newBatcher("test", 64, run, nil, 0, d,
		slog.New(slog.NewTextHandler(io.Discard, nil))))), d
}

// replyProbe is a request's sender that takes its reply within the
// replier's own send (no mailbox, no goroutine): once the batcher has gone
// past a request, whether it answered it is known.
type replyProbe chan any

func (p replyProbe) SendUserMessage(_ *actor.PID, m any) { p <- actor.UnwrapEnvelopeMessage(m) }
func (replyProbe) SendSystemMessage(*actor.PID, any)     {}
func (replyProbe) Stop(*actor.PID)                       {}

// ask sends req to pid from a replyProbe, which it returns.
func ask(system *actor.ActorSystem, pid *actor.PID, req string) <-chan any {
	p := make(replyProbe, 1)
	sender, _ := system.ProcessRegistry.Add(p, "probe-"+system.ProcessRegistry.NextId())
	system.Root.RequestWithCustomSender(pid, &batchOf[string]{req: req}, sender)
	return p
}

// TestBatcherDurabilityGathers: with a delay, the batches committed within
// it share one sync, and a batcher that stops syncs and answers what it
// owes at once instead of waiting the delay out.
func TestBatcherDurabilityGathers(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	syncs, ran := make(chan struct{}, 16), make(chan string, 16)
	pid, _ := durableBatcher(system, ran, func() error {
		syncs <- struct{}{}
		return nil
	}, time.Hour) // only the stop ends the gathering
	a := ask(system, pid, "a")
	<-ran
	b := ask(system, pid, "b")
	<-ran // two batches committed, neither synced
	if err := system.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	for name, done := range map[string]<-chan any{"a": a, "b": b} {
		if r, ok := (<-done).(*batchResult[string]); !ok || r.res != name {
			t.Fatalf("%s answered %+v", name, r)
		}
	}
	if n := len(syncs); n != 1 {
		t.Fatalf("%d syncs for two batches gathered, want 1", n)
	}
}

// TestBatcherHoldsBehindSync: while an fsync runs with a batch committed
// behind it, the next requests wait uncommitted, and commit together once
// the fsync has returned.
func TestBatcherHoldsBehindSync(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	events := make(chan string, 16) // the requests as they run, and the fsyncs, in one order
	release := make(chan error)
	pid, _ := durableBatcher(system, events, func() error {
		events <- "sync"
		err := <-release
		events <- "synced"
		return err
	}, 0)
	a := ask(system, pid, "a")
	want := func(ev ...string) {
		t.Helper()
		for _, e := range ev {
			if got := <-events; got != e {
				t.Fatalf("event %q, want %q", got, e)
			}
		}
	}
	want("a", "sync") // a committed; its fsync runs until release
	b := ask(system, pid, "b")
	want("b") // b committed behind the running fsync
	c, d := ask(system, pid, "c"), ask(system, pid, "d")
	release <- nil // a's fsync returns: c and d may commit, as one batch
	want("synced")
	var ran []string
	for len(ran) < 2 { // and b's fsync begins meanwhile
		if e := <-events; e != "sync" {
			ran = append(ran, e)
		}
	}
	if slices.Sort(ran); !slices.Equal(ran, []string{"c", "d"}) {
		t.Fatalf("ran %v after a's fsync, want c and d", ran)
	}
	answered := make(chan struct{})
	defer close(answered)
	go func() { // b's fsync, and c's and d's: one or two more
		for {
			select {
			case release <- nil:
			case <-answered:
				return
			}
		}
	}()
	for _, done := range []<-chan any{a, b, c, d} {
		if _, ok := (<-done).(*batchResult[string]); !ok {
			t.Fatal("a request was not answered")
		}
	}
}
