// Package cork coalesces a WebSocket's frames into one system call: a Conn
// under a gorilla WebSocket keeps what is written to it while corked and
// writes it in one go when uncorked. The writer of a connection corks it
// while it has frames queued, so that a burst (a claim of many rows, the
// acks of a batch of sends, the pushes of a fan-out) costs one write
// instead of one per frame. The daemon's broker connections (wsclient)
// and the broker's (wsserver) both use it.
package cork

import (
	"net"
	"sync"
)

// Conn is a net.Conn whose writes can be held back. Uncorked, a write goes
// straight through. The WebSocket serializes its own writes; the mutex
// guards the buffer against a control frame (a pong, written by the
// reader) arriving during a cork.
type Conn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	buf    []byte
}

func (c *Conn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		c.buf = append(c.buf, b...)
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// Cork holds back the writes that follow.
func (c *Conn) Cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// Uncork writes what was held back, in one write.
func (c *Conn) Uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	if cap(c.buf) > 1<<20 {
		c.buf = nil // a rare huge burst: do not keep its buffer
	} else {
		c.buf = c.buf[:0]
	}
	return err
}

// Listener is a net.Listener whose connections are Conns: an HTTP
// server's hijacked connection (a WebSocket's) is then one.
type Listener struct{ net.Listener }

// Accept wraps the next connection.
func (l Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &Conn{Conn: c}, nil
}
