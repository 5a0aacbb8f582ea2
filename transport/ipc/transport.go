package ipc

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// unixTransport is the client's http.RoundTripper on the daemon's socket.
// Each request is written, and its answer read, on the caller's goroutine,
// over a connection kept open between requests (HTTP/1.1 keep-alive): no
// goroutine per connection reading and writing for it, as net/http's
// Transport has, which took half a goroutine switch per request each way
// and a sixth of an MCP server's CPU when agents sent mail at full speed
// (docs/BENCHMARKS.md, "Agent mail: messages"). What it keeps of
// net/http's: a request whose connection turned out to be closed before
// anything of it was written (a daemon restarted since) is sent again on
// a new one, as is a GET or HEAD whose answer did not come; the context
// (with the client's timeout) ends a request, or a streamed body, at any
// point.
type unixTransport struct {
	path   string
	dialer net.Dialer

	mu   sync.Mutex
	idle []*unixConn // most recently used last
}

// unixConn is one connection to the daemon with its buffers.
type unixConn struct {
	net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	used time.Time // when it was put back idle
}

func newUnixTransport(path string) *unixTransport {
	return &unixTransport{path: path, dialer: net.Dialer{Timeout: time.Second}}
}

func (t *unixTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	for {
		c := t.get()
		reused := c != nil
		if c == nil {
			conn, err := t.dialer.DialContext(req.Context(), "unix", t.path)
			if err != nil {
				closeBody(req)
				return nil, err
			}
			c = &unixConn{Conn: conn, br: bufio.NewReader(conn), bw: bufio.NewWriter(conn)}
		}
		resp, written, err := t.exchange(c, req)
		if err == nil {
			return resp, nil
		}
		c.Close()
		// A request whose own deadline passed, or whose caller gave up, is
		// not sent again: it would fail to dial, which says "no daemon".
		if !reused || !retryable(req, written) || req.Context().Err() != nil {
			closeBody(req)
			return nil, err
		}
		if req.Body != nil && req.Body != http.NoBody {
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

// retryable reports whether a request that failed on a reused connection
// may be sent again: when none of it was written, or when it is a GET or
// HEAD (which change nothing).
func retryable(req *http.Request, written bool) bool {
	if !written {
		return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	}
	return req.Method == http.MethodGet || req.Method == http.MethodHead
}

// exchange writes req on c and reads its answer's head; the body is read
// by the caller, and gives c back when it has been read to its end.
func (t *unixTransport) exchange(c *unixConn, req *http.Request) (*http.Response, bool, error) {
	stop := context.AfterFunc(req.Context(), func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error, written bool) (*http.Response, bool, error) {
		stop()
		if cerr := req.Context().Err(); cerr != nil {
			err = cerr
		}
		return nil, written, err
	}
	if err := req.Write(c.bw); err != nil {
		return fail(err, false)
	}
	if err := c.bw.Flush(); err != nil {
		return fail(err, false)
	}
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		return fail(err, true)
	}
	resp.Body = &unixBody{ReadCloser: resp.Body, t: t, c: c, stop: stop, keep: !resp.Close && !req.Close}
	return resp, true, nil
}

// unixBody is an answer's body; read to its end, it puts the connection
// back idle (when both ends keep it alive), else closing it closes the
// connection.
type unixBody struct {
	io.ReadCloser
	t    *unixTransport
	c    *unixConn
	stop func() bool
	keep bool
	done bool
}

func (b *unixBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.release(errors.Is(err, io.EOF))
	}
	return n, err
}

func (b *unixBody) Close() error {
	if !b.done {
		b.release(false)
	}
	return nil
}

func (b *unixBody) release(atEnd bool) {
	b.done = true
	if !b.stop() || !atEnd || !b.keep { // stop false: the context ended it, and set a deadline
		b.c.Close()
		return
	}
	b.t.put(b.c)
}

// Idle connections a client keeps to its daemon.
const (
	// maxIdleConns is how many: a client shared by concurrent callers (an
	// MCP server's tool calls beside its event stream, the web view's
	// requests) would otherwise close and dial again after each burst,
	// costing both ends a connection each time.
	maxIdleConns = 16
	// idleConnTimeout closes one unused for this long, when it is next
	// looked for.
	idleConnTimeout = 30 * time.Second
)

// get takes the most recently used idle connection, closing those idle
// too long; nil when there is none.
func (t *unixTransport) get() *unixConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.idle) > 0 {
		c := t.idle[len(t.idle)-1]
		t.idle = t.idle[:len(t.idle)-1]
		if time.Since(c.used) < idleConnTimeout {
			return c
		}
		c.Close()
	}
	return nil
}

func (t *unixTransport) put(c *unixConn) {
	c.used = time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.idle) == maxIdleConns {
		t.idle[0].Close()
		t.idle = append(t.idle[:0], t.idle[1:]...)
	}
	t.idle = append(t.idle, c)
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
