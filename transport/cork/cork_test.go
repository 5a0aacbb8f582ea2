package cork

import (
	"bytes"
	"net"
	"testing"
)

// writesConn is a net.Conn that records each write.
type writesConn struct {
	net.Conn
	writes [][]byte
}

func (w *writesConn) Write(b []byte) (int, error) {
	w.writes = append(w.writes, append([]byte(nil), b...))
	return len(b), nil
}

// TestConn: corked writes go out as one, in order, at uncork; an
// uncorked write goes straight through; an empty cork writes nothing.
func TestConn(t *testing.T) {
	under := &writesConn{}
	c := &Conn{Conn: under}
	c.Write([]byte("a"))
	c.Cork()
	c.Write([]byte("bc"))
	c.Write([]byte("d"))
	if len(under.writes) != 1 {
		t.Fatalf("corked writes went out: %q", under.writes)
	}
	if err := c.Uncork(); err != nil {
		t.Fatal(err)
	}
	c.Cork()
	if err := c.Uncork(); err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("e"))
	if got := bytes.Join(under.writes, []byte("|")); string(got) != "a|bcd|e" {
		t.Fatalf("writes %q, want a|bcd|e", got)
	}
}
