package daemon

import (
	"context"
	"net"
	"sync"
)

// pipeListener is the embedded broker's in-process door: the daemon's own
// connections to it (the member's and every agent session's) are net.Pipe
// pairs whose far ends the broker's HTTP server accepts here, beside its
// loopback TCP port (which other processes of the machine use). A frame
// then crosses as one copy between two goroutines instead of a write and a
// read system call and a wake-up through the poller, at each of the
// message's four crossings (send, ack, push, client_ack).
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

// Accept hands the broker's server the far end of the next Dial.
func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close ends Accept and every later Dial; connections made stay open.
func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr }

// Dial is the daemon's broker connections' NetDialContext for the embedded
// broker: it ignores the address (the broker's loopback URL, still what the
// WebSocket handshake names) and connects through the listener.
func (l *pipeListener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	near, far := net.Pipe()
	select {
	case l.conns <- pipeConn{far}:
		return pipeConn{near}, nil
	case <-l.closed:
		near.Close()
		far.Close()
		return nil, net.ErrClosed
	case <-ctx.Done():
		near.Close()
		far.Close()
		return nil, ctx.Err()
	}
}

// pipeAddr is both ends' address: loopback, as the broker's TCP clients on
// this machine have, so that the broker's limits treat the daemon's own
// connections as it treats theirs.
var pipeAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}

// pipeConn is one end of a pipe with pipeAddr as its addresses.
type pipeConn struct{ net.Conn }

func (pipeConn) LocalAddr() net.Addr  { return pipeAddr }
func (pipeConn) RemoteAddr() net.Addr { return pipeAddr }
