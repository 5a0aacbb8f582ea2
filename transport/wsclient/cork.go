package wsclient

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// maxCoalesce bounds the frames the writer gathers into one write.
const maxCoalesce = 256

// corkedConn is the connection under the WebSocket: while corked, what is
// written to it is kept and goes out in one write when it is uncorked. The
// writer corks it while it has frames queued, so that a burst (a claim of
// many rows, the acks of a batch of pushes) costs one system call instead
// of one per frame. Uncorked, a write goes straight through. The WebSocket
// serializes its own writes; the mutex guards the buffer against a control
// frame (a pong, written by the reader) arriving during a cork.
type corkedConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	buf    []byte
}

func (c *corkedConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		c.buf = append(c.buf, b...)
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *corkedConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what was kept, in one write.
func (c *corkedConn) uncork() error {
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

// writeBuffers are the WebSocket write buffers of every connection, held
// only while a frame is written: an idle connection holds none.
var writeBuffers = &sync.Pool{}

// corkingDial wraps dial's connections in corkedConn and remembers the
// last one.
type corkingDial struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	conn *corkedConn
}

func (d *corkingDial) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.conn = &corkedConn{Conn: c}
	return d.conn, nil
}

// writeQueued writes data and the frames queued behind it (up to
// maxCoalesce), corked: one write for the lot.
func (c *Conn) writeQueued(data []byte) error {
	c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
	if c.cork == nil {
		return c.ws.WriteMessage(websocket.TextMessage, data)
	}
	c.cork.cork()
	err := c.ws.WriteMessage(websocket.TextMessage, data)
	for n := 1; err == nil && n < maxCoalesce; n++ {
		next, ok := c.out.Pop()
		if !ok {
			break
		}
		err = c.ws.WriteMessage(websocket.TextMessage, next)
	}
	if uerr := c.cork.uncork(); err == nil {
		err = uerr
	}
	return err
}
