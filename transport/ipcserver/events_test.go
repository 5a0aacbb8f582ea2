package ipcserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

func withKeepalive(d time.Duration) harnessOpt {
	return func(_ *harness, o *Options) { o.keepalive = d }
}

func TestEventsFraming(t *testing.T) {
	h := newHarness(t)
	s := h.stream()
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-store",
		"X-Accel-Buffering": "no"} {
		if got := s.resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	h.appendEvent("peer_join", `{"mesh":"a","pubkey":"p","display_name":"Ann"}`)
	h.appendEvent("message", `{"id":"x"}`)
	if f := s.next(); f.raw != "id: 1\nevent: peer_join\ndata: {\"mesh\":\"a\",\"pubkey\":\"p\",\"display_name\":\"Ann\"}\n\n" {
		t.Fatalf("frame %q", f.raw)
	}
	if f := s.next(); f.id != "2" || f.event != "message" || f.data != `{"id":"x"}` {
		t.Fatalf("frame %+v", f)
	}
}

func TestEventsKeepalive(t *testing.T) {
	h := newHarness(t, withKeepalive(5*time.Millisecond))
	s := h.stream()
	for range 2 {
		select {
		case f := <-s.frames:
			if f.raw != ": keepalive\n\n" {
				t.Fatalf("frame %q, want a keepalive comment", f.raw)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no keepalive")
		}
	}
}

// TestEventsReplay: with Last-Event-ID the stream sends exactly the
// persisted events after it (across several replay pages), then live
// events, skipping ids the replay already sent.
func TestEventsReplay(t *testing.T) {
	h := newHarness(t)
	const persisted = 2*replayPage + 7
	for i := 1; i <= persisted; i++ {
		h.appendEvent("message", fmt.Sprintf(`{"n":%d}`, i))
	}
	const from = 3
	s := h.stream("Last-Event-ID", strconv.Itoa(from))
	for i := from + 1; i <= persisted; i++ {
		if f := s.next(); f.id != strconv.Itoa(i) || f.data != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("replay: got %+v, want id %d", f, i)
		}
	}
	// A late re-publish of an event already replayed is not sent again.
	h.system.Root.Send(h.events, &messages.Publish{Event: messages.Event{ID: persisted, Name: "message", Data: []byte(`{}`)}})
	h.appendEvent("peer_leave", `{"live":1}`)
	if f := s.next(); f.id != strconv.Itoa(persisted+1) || f.event != "peer_leave" {
		t.Fatalf("live: got %+v, want id %d", f, persisted+1)
	}
}

// TestEventsReplayWhileAppending: events committed and published while a
// client resumes reach it exactly once, in id order, with no gap.
func TestEventsReplayWhileAppending(t *testing.T) {
	h := newHarness(t)
	const total, from = 400, 50
	for i := 1; i <= from+20; i++ {
		h.appendEvent("message", `{}`)
	}
	appended := make(chan struct{})
	go func() {
		defer close(appended)
		for i := from + 21; i <= total; i++ {
			h.appendEvent("message", `{}`)
		}
	}()
	s := h.stream("Last-Event-ID", strconv.Itoa(from))
	for i := from + 1; i <= total; i++ {
		if f := s.next(); f.id != strconv.Itoa(i) {
			t.Fatalf("got id %s, want %d", f.id, i)
		}
	}
	<-appended
	h.appendEvent("message", `{"last":true}`)
	if f := s.next(); f.id != strconv.Itoa(total+1) {
		t.Fatalf("got id %s after the last one, want %d", f.id, total+1)
	}
}

// TestEventsMissed: resuming after events the log no longer holds sends
// events_missed pointing at the inbox, then live events.
func TestEventsMissed(t *testing.T) {
	h := newHarness(t)
	h.appendEvent("message", `{}`)
	s := h.stream("Last-Event-ID", "999")
	f := s.next()
	var data struct {
		LastEventID int64  `json:"last_event_id"`
		ResumeWith  string `json:"resume_with"`
	}
	if err := json.Unmarshal([]byte(f.data), &data); err != nil || f.event != EventsMissed || f.id != "" ||
		data.LastEventID != 999 || !strings.HasPrefix(data.ResumeWith, "/v1/inbox?since=") {
		t.Fatalf("frame %+v (%v)", f, err)
	}
	h.appendEvent("peer_join", `{}`)
	if f := s.next(); f.id != "2" || f.event != "peer_join" {
		t.Fatalf("live: %+v", f)
	}
}

func TestEventsBadLastEventID(t *testing.T) {
	h := newHarness(t)
	for _, bad := range []string{"abc", "-1", "1.5"} {
		resp := h.request(context.Background(), http.MethodGet, "/v1/events", "", "Last-Event-ID", bad)
		var eb messages.ErrorBody
		json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode != 400 || eb.Error != messages.CodeInvalidQuery {
			t.Errorf("Last-Event-ID %q: %d %+v", bad, resp.StatusCode, eb)
		}
	}
}

// TestEventsStreamLimit: an identity's share of streams (here the
// unfiltered view's) run at once without holding in-flight slots; one more
// is refused with 429 too_many_streams.
func TestEventsStreamLimit(t *testing.T) {
	h := newHarness(t)
	for range messages.MaxStreamsPerIdentity {
		h.stream()
	}
	if n := len(h.srv.inflight); n != 0 {
		t.Errorf("%d in-flight slots held by event streams", n)
	}
	h.wantError(http.MethodGet, "/v1/events", "", http.StatusTooManyRequests, "too_many_streams")
	if resp := h.do(http.MethodGet, "/v1/version", "", nil); resp.StatusCode != 200 {
		t.Errorf("version with the streams open: %d", resp.StatusCode)
	}
}

// TestEventsEndOnShutdown: Shutdown ends open streams instead of waiting
// for them; new streams are refused.
func TestEventsEndOnShutdown(t *testing.T) {
	h := newHarness(t)
	a, b := h.stream(), h.stream()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	a.waitEnd()
	b.waitEnd()
}

// TestEventsEndWhenSubscriptionCloses: the stream ends when the events
// actor closes its channel (slow consumer, actor stop).
func TestEventsEndWhenSubscriptionCloses(t *testing.T) {
	h := newHarness(t)
	s := h.stream()
	h.system.Root.StopFuture(h.events).Wait()
	s.waitEnd()
}

// TestEventsMeshFilter: ?mesh= streams that mesh's events and those of no
// mesh, replayed and live; an unknown mesh is 404.
func TestEventsMeshFilter(t *testing.T) {
	h := newHarness(t, func(_ *harness, o *Options) {
		o.Meshes = []Mesh{{Info: messages.MeshInfo{Mesh: "a"}}, {Info: messages.MeshInfo{Mesh: "b"}}}
	})
	first := h.appendEvent("message", `{"mesh":"b","client_message_id":"b-0"}`)
	h.appendEvent("message", `{"mesh":"a","client_message_id":"a-0"}`)
	s := h.streamPath("/v1/events?mesh=a", "Last-Event-ID", fmt.Sprint(first.ID-1))
	h.appendEvent("message", `{"mesh":"b","client_message_id":"b-1"}`)
	h.appendEvent("outbox_pressure_high", `{"level":"high"}`)
	h.appendEvent("message", `{"mesh":"a","client_message_id":"a-1"}`)
	var got []string
	for len(got) < 3 {
		f := s.next()
		got = append(got, f.data)
	}
	want := []string{`{"mesh":"a","client_message_id":"a-0"}`, `{"level":"high"}`, `{"mesh":"a","client_message_id":"a-1"}`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stream of mesh a: %v, want %v", got, want)
	}
	h.wantError(http.MethodGet, "/v1/events?mesh=c", "", http.StatusNotFound, messages.CodeMeshNotAttached)
}
