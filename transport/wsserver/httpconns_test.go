package wsserver

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// faceServer serves a Server through its HTTPServer on loopback, with the
// caps applied to loopback too.
func faceServer(t *testing.T, limits Limits) (*Server, string) {
	t.Helper()
	limits.CapLoopback = true
	s := New(func(*Conn) Session { return nopSession{} }, func() any { return map[string]string{"status": "ok"} }, nil, limits,
		slog.New(slog.DiscardHandler))
	srv := httptest.NewUnstartedServer(s)
	srv.Config = s.HTTPServer()
	srv.Start()
	t.Cleanup(srv.Close)
	return s, srv.Listener.Addr().String()
}

// get sends GET /health on c and returns the status code.
func get(t *testing.T, c net.Conn) int {
	t.Helper()
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: broker\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// closedByServer reports whether the server has closed c (a read ends).
func closedByServer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestHTTPFaceCountsEveryConnection: connections that never upgrade count
// against the caps of unauthenticated ones from their accept — one past
// the cap is answered 429 and closed, whatever it asks — and give their
// count back when they close; a keep-alive connection idle past
// IdleTimeout is closed by the server.
func TestHTTPFaceCountsEveryConnection(t *testing.T) {
	s, addr := faceServer(t, Limits{PendingPerSource: 2, Pending: 100, IdleTimeout: 300 * time.Millisecond})
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := dial(), dial()
	if code := get(t, a); code != http.StatusOK {
		t.Fatalf("GET /health = %d", code)
	}
	wait.For(t, 5*time.Second, "both connections counted", func() bool { return s.PendingCount() == 2 })
	third := dial()
	if code := get(t, third); code != http.StatusTooManyRequests {
		t.Fatalf("a third connection's GET /health = %d, want 429", code)
	}
	wait.For(t, 5*time.Second, "the connection past the cap closed", func() bool { return closedByServer(third) })
	if _, _, err := (&websocket.Dialer{NetDial: func(string, string) (net.Conn, error) { return net.Dial("tcp", addr) }}).Dial(
		"ws://broker/ws", nil); err == nil || !strings.Contains(err.Error(), "bad handshake") {
		t.Errorf("an upgrade past the cap: %v, want a refused handshake", err)
	}
	b.Close()
	wait.For(t, 5*time.Second, "the closed connection's count given back", func() bool { return s.PendingCount() <= 1 })
	wait.For(t, 5*time.Second, "the idle keep-alive connection closed", func() bool { return closedByServer(a) })
	wait.For(t, 5*time.Second, "every count given back", func() bool { return s.PendingCount() == 0 })
}

// TestHTTPFaceHandsTheCountToItsWebSocket: an upgraded connection counts
// once, as its WebSocket awaiting its hello, until it authenticates.
func TestHTTPFaceHandsTheCountToItsWebSocket(t *testing.T) {
	conns := make(chan *Conn, 1)
	s := New(func(c *Conn) Session { conns <- c; return nopSession{} }, func() any { return nil }, nil,
		Limits{PendingPerSource: 1, Pending: 1, CapLoopback: true, HelloTimeout: time.Minute}, slog.New(slog.DiscardHandler))
	srv := httptest.NewUnstartedServer(s)
	srv.Config = s.HTTPServer()
	srv.Start()
	defer srv.Close()
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", nil)
	if err != nil {
		t.Fatalf("an upgrade within the cap of 1: %v", err)
	}
	defer ws.Close()
	c := <-conns
	if n := s.PendingCount(); n != 1 {
		t.Errorf("pending while the WebSocket awaits its hello = %d, want 1", n)
	}
	c.Authenticated()
	wait.For(t, 5*time.Second, "the count given back at the hello", func() bool { return s.PendingCount() == 0 })
}
