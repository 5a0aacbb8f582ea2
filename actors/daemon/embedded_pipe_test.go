package daemon

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestPipeListener: a Dial is accepted as the far end of a pipe, both ends
// loopback; bytes cross; a Dial nobody accepts ends with its context; after
// Close, Accept and Dial fail with net.ErrClosed and made connections stay.
func TestPipeListener(t *testing.T) {
	l := newPipeListener()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	near, err := l.Dial(context.Background(), "tcp", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	far := <-accepted
	for _, c := range []net.Conn{near, far} {
		if a, ok := c.RemoteAddr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
			t.Fatalf("remote address %v, want loopback", c.RemoteAddr())
		}
	}
	go near.Write([]byte("hello"))
	buf := make([]byte, 5)
	if _, err := io.ReadFull(far, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q, %v", buf, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.Dial(ctx, "tcp", ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a dial nobody accepts: %v", err)
	}

	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	if _, err := l.Dial(context.Background(), "tcp", ""); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Dial after Close: %v", err)
	}
	go far.Write([]byte("still"))
	if _, err := io.ReadFull(near, buf); err != nil || string(buf) != "still" {
		t.Fatalf("a connection made before Close: %q, %v", buf, err)
	}
}
