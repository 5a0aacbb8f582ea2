package ipcserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/transport/ipc/metrics"
)

const testToken = "test-token"

// harness is an IPC server on a loopback port, in front of a real store
// actor over real SQLite files and a real events actor.
type harness struct {
	t      *testing.T
	system *actor.ActorSystem
	store  *actor.PID
	events *actor.PID
	srv    *Server
	base   string
}

type harnessOpt func(*harness, *Options)

func newHarness(t *testing.T, opts ...harnessOpt) *harness {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	ctx := context.Background()
	outbox, err := persistence.OpenOutbox(ctx, filepath.Join(dir, "outbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	inboxDB, err := persistence.OpenInbox(ctx, filepath.Join(dir, "inbox.db"), log)
	if err != nil {
		t.Fatal(err)
	}
	inbox, err := persistence.NewInbox(inboxDB)
	if err != nil {
		t.Fatal(err)
	}
	system := actors.NewSystem(log)
	h := &harness{t: t, system: system}
	h.store = system.Root.Spawn(actor.PropsFromProducer(actors.NewStore(actors.StoreOptions{Outbox: outbox, Inbox: inbox, Metrics: metrics.New(), Log: log})))
	h.events = system.Root.Spawn(actor.PropsFromProducer(actors.NewEvents(metrics.New(), log)))
	o := Options{Token: testToken, Root: system.Root, Store: h.store, Events: h.events, Log: log,
		Started: time.Now(), DaemonVersion: "test", SchemaVersion: 1}
	for _, f := range opts {
		f(h, &o)
	}
	h.srv = New(o)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.base = "http://" + l.Addr().String()
	served := make(chan error, 1)
	go func() { served <- h.srv.Serve(l) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// A test may have shut the server down already.
		if err := h.srv.Shutdown(sctx); err != nil && !errors.Is(err, net.ErrClosed) {
			t.Errorf("shutdown: %v", err)
		}
		<-served
		system.Root.StopFuture(h.events).Wait()
		system.Root.StopFuture(h.store).Wait()
		system.Shutdown()
		inbox.Close()
		outbox.Close()
	})
	return h
}

// request sends an authorized request; body may be "".
func (h *harness) request(ctx context.Context, method, path, body string, header ...string) *http.Response {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

// do does a request and decodes the JSON answer into v (may be nil);
// it returns the response with its body closed.
func (h *harness) do(method, path, body string, v any) *http.Response {
	h.t.Helper()
	resp := h.request(context.Background(), method, path, body)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	if v != nil {
		if err := json.Unmarshal(raw, v); err != nil {
			h.t.Fatalf("%s %s: %v in %q", method, path, err, raw)
		}
	}
	return resp
}

// wantError checks an error answer's status and code.
func (h *harness) wantError(method, path, body string, status int, code string) {
	h.t.Helper()
	var eb messages.ErrorBody
	resp := h.do(method, path, body, &eb)
	if resp.StatusCode != status || eb.Error != code {
		h.t.Errorf("%s %s %s: %d %+v, want %d %s", method, path, body, resp.StatusCode, eb, status, code)
	}
}

// appendEvent persists an event through the store and publishes it, as
// the daemon does after a commit.
func (h *harness) appendEvent(name, data string) messages.Event {
	h.t.Helper()
	res, err := h.system.Root.RequestFuture(h.store, &messages.AppendEvent{Name: name, Data: []byte(data)}, 5*time.Second).Result()
	if err != nil {
		h.t.Fatal(err)
	}
	ev, ok := res.(*messages.EventAppended)
	if !ok || ev.Err != nil {
		h.t.Fatalf("append: %#v", res)
	}
	h.system.Root.Send(h.events, &messages.Publish{Event: *ev.Event})
	return *ev.Event
}

// frame is one SSE frame as read from the wire.
type frame struct {
	raw     string
	id      string
	event   string
	data    string
	comment string
}

// sseStream reads the frames of an event stream in a goroutine.
type sseStream struct {
	t      *testing.T
	resp   *http.Response
	cancel context.CancelFunc
	frames chan frame
	ended  chan struct{}
}

func (h *harness) stream(header ...string) *sseStream {
	h.t.Helper()
	return h.streamPath("/v1/events", header...)
}

// streamPath opens the event stream at path (with its query).
func (h *harness) streamPath(path string, header ...string) *sseStream {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	resp := h.request(ctx, http.MethodGet, path, "", header...)
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		h.t.Fatalf("GET /v1/events: %d %s", resp.StatusCode, raw)
	}
	s := &sseStream{t: h.t, resp: resp, cancel: cancel, frames: make(chan frame, 4096), ended: make(chan struct{})}
	go s.read()
	h.t.Cleanup(s.close)
	return s
}

func (s *sseStream) read() {
	defer close(s.ended)
	br := bufio.NewReader(s.resp.Body)
	var f frame
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		f.raw += line
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			s.frames <- f
			f = frame{}
		case strings.HasPrefix(line, ":"):
			f.comment = strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, "id: "):
			f.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			f.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			f.data = line[6:]
		}
	}
}

// next returns the next frame that is not a keepalive comment.
func (s *sseStream) next() frame {
	s.t.Helper()
	for {
		select {
		case f := <-s.frames:
			if f.comment == "keepalive" {
				continue
			}
			return f
		case <-s.ended:
			s.t.Fatal("stream ended")
		case <-time.After(5 * time.Second):
			s.t.Fatal("no frame within 5 s")
		}
	}
}

// waitEnd waits until the server ends the stream.
func (s *sseStream) waitEnd() {
	s.t.Helper()
	select {
	case <-s.ended:
	case <-time.After(5 * time.Second):
		s.t.Fatal("stream still open after 5 s")
	}
}

func (s *sseStream) close() {
	s.cancel()
	s.resp.Body.Close()
	<-s.ended
}

// fakeConn stands in for a mesh's broker-connection actor, to give the
// handlers peer lists and failures no real broker produces on demand
// (integration/ runs them against the real one). down makes it answer
// every request with an error, as a connection that is not connected does.
type fakeConn struct {
	peers    []messages.Peer
	down     bool
	profiles chan *messages.SetProfile
	silent   bool            // list_peers is never answered
	kept     []messages.Peer // the peer list kept (messages.KeptPeers); nil: none
}

func (f *fakeConn) Receive(ctx actor.Context) {
	var notConnected error
	if f.down {
		notConnected = errNotConnected
	}
	switch m := ctx.Message().(type) {
	case *messages.ListPeers:
		if !f.silent {
			ctx.Respond(&messages.PeersList{Peers: f.peers, Err: notConnected})
		}
	case *messages.KeptPeers:
		if f.kept == nil {
			ctx.Respond(&messages.PeersList{Err: errNotConnected})
		} else {
			ctx.Respond(&messages.PeersList{Peers: f.kept})
		}
	case *messages.SetProfile:
		if f.profiles != nil {
			f.profiles <- m
		}
		var applied []string
		if m.Summary != nil {
			applied = append(applied, "summary")
		}
		if m.Status != nil {
			applied = append(applied, "status")
		}
		if m.Visible != nil {
			applied = append(applied, "visible")
		}
		ctx.Respond(&messages.ProfileApplied{Applied: applied, Meshes: []string{m.Mesh}, Err: notConnected})
	case *messages.MeshStatus:
		ctx.Respond(&messages.MeshStatusReply{Connected: true, Breaker: "closed", LagMs: 12, Err: notConnected})
	}
}

type connErr string

func (e connErr) Error() string { return string(e) }

const errNotConnected = connErr("broker connection is down")

func (h *harness) spawnConn(f *fakeConn) *actor.PID {
	pid := h.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return f }))
	h.t.Cleanup(func() { h.system.Root.StopFuture(pid).Wait() })
	return pid
}
