package ipcserver

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// TestReplyBoxes: an answered box is reused; a box whose answer came too
// late is dropped, and the late answer never reaches a later request.
func TestReplyBoxes(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	release := make(chan any)
	pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case string:
			if m == "hold" {
				ctx.Respond(<-release) // answers only when the test says
				return
			}
			ctx.Respond("re: " + m)
		}
	}))
	r := newReplies(system, 4)
	if got, ok := r.ask(pid, "one", time.Second, nil); !ok || got != "re: one" {
		t.Fatalf("ask one: %v %v", got, ok)
	}
	if got, ok := r.ask(pid, "hold", 50*time.Millisecond, nil); ok {
		t.Fatalf("ask hold answered %v before the deadline", got)
	}
	release <- "late"
	for range 3 {
		if got, ok := r.ask(pid, "two", time.Second, nil); !ok || got != "re: two" {
			t.Fatalf("ask after a late answer: %v %v; want re: two", got, ok)
		}
	}
	gone := make(chan struct{})
	close(gone) // the client went away: the ask gives up, and its box is no one's
	if got, ok := r.ask(pid, "hold", time.Minute, gone); ok {
		t.Fatalf("ask of a client gone answered %v", got)
	}
	release <- "late again"
	if got, ok := r.ask(pid, "three", time.Second, nil); !ok || got != "re: three" {
		t.Fatalf("ask after a client gone: %v %v; want re: three", got, ok)
	}
}
