package actors

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/messages/fifo"
	"github.com/claudemesh/claudemesh-go/transport/ipc/metrics"
)

// spawnEvents starts a real events actor in its own actor system.
func spawnEvents(t *testing.T) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	system := NewSystem(log)
	pid := system.Root.Spawn(actor.PropsFromProducer(NewEvents(metrics.New(), log)))
	t.Cleanup(func() {
		system.Root.StopFuture(pid).Wait()
		system.Shutdown()
	})
	return system, pid
}

func subscribe(t *testing.T, system *actor.ActorSystem, pid *actor.PID) *messages.Subscription {
	t.Helper()
	return subscribeAs(t, system, pid, "")
}

func subscribeAs(t *testing.T, system *actor.ActorSystem, pid *actor.PID, identity string) *messages.Subscription {
	t.Helper()
	res, err := system.Root.RequestFuture(pid, &messages.Subscribe{Identity: identity}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	sub, ok := res.(*messages.Subscription)
	if !ok {
		t.Fatalf("Subscribe answered %T", res)
	}
	return sub
}

// drainClosed waits until q is closed and returns what it still held; it
// fails if q stays open.
func drainClosed(t *testing.T, q *fifo.Queue[messages.Event]) []messages.Event {
	t.Helper()
	select {
	case <-q.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("stream still open, holding %d events", q.Len())
	}
	var got []messages.Event
	for ev, ok := q.Pop(); ok; ev, ok = q.Pop() {
		got = append(got, ev)
	}
	return got
}

// next is q's next event, waiting for it; ok is false if q closes first.
func next(t *testing.T, q *fifo.Queue[messages.Event]) (messages.Event, bool) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		if ev, ok := q.Pop(); ok {
			return ev, true
		}
		select {
		case <-q.Ready():
		case <-q.Done():
			ev, ok := q.Pop()
			return ev, ok
		case <-timeout:
			t.Fatal("no event within 5 s")
		}
	}
}

func TestEventsFanOutInOrder(t *testing.T) {
	system, pid := spawnEvents(t)
	a, b := subscribe(t, system, pid), subscribe(t, system, pid)
	if a.Err != nil || b.Err != nil || a.ID == b.ID {
		t.Fatalf("subscriptions: %+v %+v", a, b)
	}
	for i := int64(1); i <= 10; i++ {
		system.Root.Send(pid, &messages.Publish{Event: messages.Event{ID: i, Name: "message", Data: []byte(`{}`)}})
	}
	for _, sub := range []*messages.Subscription{a, b} {
		for i := int64(1); i <= 10; i++ {
			if ev, ok := next(t, sub.Events); !ok || ev.ID != i || ev.Name != "message" {
				t.Fatalf("stream %d: got %+v (%v), want id %d", sub.ID, ev, ok, i)
			}
		}
	}
	system.Root.Send(pid, &messages.Unsubscribe{ID: a.ID})
	if got := drainClosed(t, a.Events); len(got) != 0 {
		t.Fatalf("unsubscribed stream got %v", got)
	}
}

// TestEventsOfOneMesh: a stream of one mesh carries that mesh's events and
// those that name none, in order, and never another mesh's; the
// unfiltered stream carries all of them, each with the mesh its data names.
func TestEventsOfOneMesh(t *testing.T) {
	system, pid := spawnEvents(t)
	all := subscribe(t, system, pid)
	res, err := system.Root.RequestFuture(pid, &messages.Subscribe{Identity: "local/s1", Mesh: "local/s1"}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	mine := res.(*messages.Subscription)
	data := []string{`{"mesh":"local/s2","body":"not yours"}`, `{"mesh":"local/s1"}`, `{"level":"high"}`, `not json`,
		`{"mesh":"local/s2"}`, `{"body":{"mesh":"local/s2"},"mesh":"local/s1"}`}
	for i, d := range data {
		system.Root.Send(pid, &messages.Publish{Event: messages.Event{ID: int64(i + 1), Name: "e", Data: []byte(d)}})
	}
	for i, want := range []string{"local/s2", "local/s1", "", "", "local/s2", "local/s1"} {
		if ev, ok := next(t, all.Events); !ok || ev.ID != int64(i+1) || ev.Mesh != want {
			t.Fatalf("unfiltered stream: got %+v (%v), want id %d of mesh %q", ev, ok, i+1, want)
		}
	}
	for _, id := range []int64{2, 3, 4, 6} {
		if ev, ok := next(t, mine.Events); !ok || ev.ID != id {
			t.Fatalf("local/s1's stream: got %+v (%v), want id %d", ev, ok, id)
		}
	}
	system.Root.Send(pid, &messages.Unsubscribe{ID: mine.ID})
	if got := drainClosed(t, mine.Events); len(got) != 0 {
		t.Fatalf("local/s1's stream also got %+v", got)
	}
}

func TestEventsMaxStreams(t *testing.T) {
	system, pid := spawnEvents(t)
	var subs []*messages.Subscription
	for i := range messages.MaxStreams {
		sub := subscribeAs(t, system, pid, fmt.Sprint("local/session-", i/messages.MaxStreamsPerIdentity))
		if sub.Err != nil {
			t.Fatalf("stream %d refused: %v", len(subs)+1, sub.Err)
		}
		subs = append(subs, sub)
	}
	over := subscribe(t, system, pid)
	var me *messages.Error
	if !errors.As(over.Failure(), &me) || me.Status != 429 || me.Code != "too_many_streams" || over.Events != nil {
		t.Fatalf("stream %d: %+v, want 429 too_many_streams", messages.MaxStreams+1, over)
	}
	system.Root.Send(pid, &messages.Unsubscribe{ID: subs[0].ID})
	if again := subscribe(t, system, pid); again.Err != nil {
		t.Fatalf("after an unsubscribe: %v", again.Err)
	}
}

// TestEventsShareOfOneIdentity: one identity opening streams gets its
// share, and the others still get theirs.
func TestEventsShareOfOneIdentity(t *testing.T) {
	system, pid := spawnEvents(t)
	var first *messages.Subscription
	for i := range messages.MaxStreamsPerIdentity {
		sub := subscribeAs(t, system, pid, "local/greedy")
		if sub.Err != nil {
			t.Fatalf("stream %d of one identity refused: %v", i+1, sub.Err)
		}
		first = cmp.Or(first, sub)
	}
	var me *messages.Error
	if over := subscribeAs(t, system, pid, "local/greedy"); !errors.As(over.Failure(), &me) || me.Code != "too_many_streams" {
		t.Fatalf("one stream more of the same identity: %+v, want 429 too_many_streams", over)
	}
	for _, other := range []string{"local/polite", "mesh:local", ""} {
		if sub := subscribeAs(t, system, pid, other); sub.Err != nil {
			t.Fatalf("identity %q refused while another holds its share: %v", other, sub.Err)
		}
	}
	system.Root.Send(pid, &messages.Unsubscribe{ID: first.ID})
	if again := subscribeAs(t, system, pid, "local/greedy"); again.Err != nil {
		t.Fatalf("after one of its streams ended: %v", again.Err)
	}
}

// TestEventsSlowConsumerClosed: a stream that does not read is closed once
// its buffer is full, keeping what it buffered; the others go on.
func TestEventsSlowConsumerClosed(t *testing.T) {
	system, pid := spawnEvents(t)
	slow, fast := subscribe(t, system, pid), subscribe(t, system, pid)
	publish := func(from, to int) {
		for i := from; i <= to; i++ {
			system.Root.Send(pid, &messages.Publish{Event: messages.Event{ID: int64(i), Name: "message", Data: []byte(`{}`)}})
		}
		// The mailbox is FIFO: once this answers, every Publish was handled.
		subscribe(t, system, pid)
	}
	readN := func(q *fifo.Queue[messages.Event], from, to int) {
		for i := from; i <= to; i++ {
			if ev, ok := next(t, q); !ok || ev.ID != int64(i) {
				t.Fatalf("got %+v (open %v), want id %d", ev, ok, i)
			}
		}
	}
	publish(1, StreamBuffer) // both buffers exactly full: nobody dropped
	readN(fast.Events, 1, StreamBuffer)
	publish(StreamBuffer+1, StreamBuffer+10)
	got := drainClosed(t, slow.Events)
	if len(got) != StreamBuffer || got[0].ID != 1 || got[len(got)-1].ID != StreamBuffer {
		t.Fatalf("slow stream got %d events, want the first %d then close", len(got), StreamBuffer)
	}
	readN(fast.Events, StreamBuffer+1, StreamBuffer+10)
	system.Root.Send(pid, &messages.Unsubscribe{ID: fast.ID})
	if rest := drainClosed(t, fast.Events); len(rest) != 0 {
		t.Fatalf("fast stream got %d more events", len(rest))
	}
}

func TestEventsStopClosesStreams(t *testing.T) {
	system, pid := spawnEvents(t)
	a, b := subscribe(t, system, pid), subscribe(t, system, pid)
	system.Root.StopFuture(pid).Wait()
	drainClosed(t, a.Events)
	drainClosed(t, b.Events)
}

func TestEventsCloseStreams(t *testing.T) {
	system, pid := spawnEvents(t)
	a := subscribe(t, system, pid)
	system.Root.Send(pid, &messages.CloseStreams{})
	drainClosed(t, a.Events)
	var me *messages.Error
	if late := subscribe(t, system, pid); !errors.As(late.Err, &me) || me.Status != 503 {
		t.Fatalf("subscribe after CloseStreams: %+v, want 503", late)
	}
	// An Unsubscribe of a closed stream is harmless.
	system.Root.Send(pid, &messages.Unsubscribe{ID: a.ID})
	subscribe(t, system, pid)
}
