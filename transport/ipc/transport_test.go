package ipc

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// socketServer serves h on a Unix socket in a fresh directory, counting
// the connections it accepted.
type socketServer struct {
	path  string
	conns atomic.Int32
	srv   *http.Server
}

func serveSocket(t *testing.T, path string, h http.Handler) *socketServer {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := &socketServer{path: path}
	s.srv = &http.Server{Handler: h, ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}}
	go s.srv.Serve(l)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// TestUnixTransport: requests in turn share one connection; a connection
// the daemon closed (a restart) is replaced without the caller seeing it,
// a POST included; a cancelled context ends a streamed body, and that
// connection is not used again; an answer not read to its end closes its
// connection rather than leaving it half read.
func TestUnixTransport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.sock")
	streaming := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stream":
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			close(streaming)
			<-r.Context().Done()
		case "/big":
			_, _ = w.Write([]byte(strings.Repeat("x", 1<<20)))
		default:
			body, _ := io.ReadAll(r.Body)
			_, _ = w.Write(append([]byte(r.Method+" "), body...))
		}
	})
	s := serveSocket(t, path, h)
	c := NewClient(path)
	ask := func(method string) string {
		t.Helper()
		var in any
		if method == http.MethodPost {
			in = "hi"
		}
		data, err := c.raw(t.Context(), method, "/echo", in)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		return string(data)
	}
	for range 5 {
		if got := ask(http.MethodPost); got != `POST "hi"` {
			t.Fatalf("POST answered %q", got)
		}
		ask(http.MethodGet)
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("ten requests in turn opened %d connections, want 1", n)
	}

	// The daemon restarts: the idle connection is dead.
	s.srv.Close()
	s = serveSocket(t, path, h)
	if got := ask(http.MethodPost); got != `POST "hi"` {
		t.Fatalf("a POST after the restart answered %q", got)
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("the restarted daemon saw %d connections, want 1", n)
	}

	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost/stream", nil)
	resp, err := (&http.Client{Transport: c.hc.Transport}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-streaming
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		read <- err
	}()
	cancel()
	if err := <-read; err == nil {
		t.Error("a streamed body read on after its context ended")
	}
	resp.Body.Close()

	before := s.conns.Load()
	resp, err = c.hc.Get("http://localhost/big")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resp.Body.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // most of it unread
	if got := ask(http.MethodGet); got != "GET " {
		t.Fatalf("GET after a half-read answer: %q", got)
	}
	if n := s.conns.Load() - before; n != 2 {
		t.Errorf("a half-read answer and the request after it used %d new connections, want 2 (the stream's and the half-read one closed)", n)
	}

	s.srv.Close()
	if _, err := c.raw(t.Context(), http.MethodGet, "/echo", nil); !errors.Is(err, ErrDaemonNotRunning) {
		t.Errorf("with no daemon: %v, want ErrDaemonNotRunning", err)
	}
}

// BenchmarkIPCTransport: one small POST and its answer over a Unix socket,
// through unixTransport and through net/http's Transport (what it
// replaced), the daemon an in-process net/http server.
func BenchmarkIPCTransport(b *testing.B) {
	path := filepath.Join(b.TempDir(), "d.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte(`{"status":"accepted"}`))
	})}
	go srv.Serve(l)
	defer srv.Close()
	nethttp := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}
	for _, rt := range []struct {
		name string
		rt   http.RoundTripper
	}{{"unix", newUnixTransport(path)}, {"nethttp", nethttp}} {
		b.Run(rt.name, func(b *testing.B) {
			c := NewClientWith(rt.rt)
			in := map[string]string{"to": "bob", "message": "hello"}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.raw(b.Context(), http.MethodPost, "/v1/send", in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestClientTimeout: a request the daemon does not answer fails once the
// client's timeout has passed, saying so (ErrNoAnswer, not "not running"),
// also on a connection an earlier answer left idle (whose GET was once sent
// again, to fail dialling under its spent deadline); one whose caller gives
// up fails with the caller's reason.
func TestClientTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.sock")
	serveSocket(t, path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/quick" {
			w.WriteHeader(http.StatusOK)
			return
		}
		<-r.Context().Done()
	}))
	c := NewClient(path).within(50 * time.Millisecond)
	if _, err := c.raw(t.Context(), http.MethodGet, "/v1/quick", nil); err != nil {
		t.Fatal(err)
	}
	_, err := c.raw(t.Context(), http.MethodGet, "/v1/slow", nil)
	if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "GET /v1/slow: no answer within 50ms") {
		t.Fatalf("unanswered: %v, want no answer within 50ms", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := NewClient(path).Send(ctx, &messages.SendRequest{To: "bob"}, ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("given up: %v, want context.Canceled", err)
	}
}

// TestEventsUnanswered: opening the event stream fails as a request does —
// "daemon not running" only when nothing took the connection; a daemon
// that hung up is not reported as absent, nor is a caller that gave up.
func TestEventsUnanswered(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewClient(filepath.Join(dir, "none.sock")).Events(t.Context(), "", 0); !errors.Is(err, ErrDaemonNotRunning) {
		t.Fatalf("no daemon: %v, want ErrDaemonNotRunning", err)
	}
	path := filepath.Join(dir, "d.sock")
	serveSocket(t, path, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // hangs up without an answer
		}
	}))
	_, err := NewClient(path).Events(t.Context(), "", 0)
	if err == nil || errors.Is(err, ErrDaemonNotRunning) || !strings.Contains(err.Error(), "GET /v1/events") {
		t.Fatalf("hung up: %v, want the request's own error", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := NewClient(path).Events(ctx, "", 0); !errors.Is(err, context.Canceled) || errors.Is(err, ErrDaemonNotRunning) {
		t.Fatalf("given up: %v, want context.Canceled", err)
	}
}
