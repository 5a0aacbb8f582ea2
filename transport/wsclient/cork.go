package wsclient

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/claudemesh/claudemesh-go/transport/cork"
)

// maxCoalesce bounds the frames the writer gathers into one write.
const maxCoalesce = 256

// writeBuffers are the WebSocket write buffers of every connection, held
// only while a frame is written: an idle connection holds none.
var writeBuffers = &sync.Pool{}

// corkingDial wraps dial's connections in corkedConn and remembers the
// last one.
type corkingDial struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	conn *cork.Conn
}

func (d *corkingDial) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.conn = &cork.Conn{Conn: c}
	return d.conn, nil
}

// writeQueued writes data and the frames queued behind it (up to
// maxCoalesce), corked: one write for the lot.
func (c *Conn) writeQueued(data []byte) error {
	c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
	if c.cork == nil {
		return c.ws.WriteMessage(websocket.TextMessage, data)
	}
	c.cork.Cork()
	err := c.ws.WriteMessage(websocket.TextMessage, data)
	for n := 1; err == nil && n < maxCoalesce; n++ {
		next, ok := c.out.Pop()
		if !ok {
			break
		}
		err = c.ws.WriteMessage(websocket.TextMessage, next)
	}
	if uerr := c.cork.Uncork(); err == nil {
		err = uerr
	}
	return err
}
