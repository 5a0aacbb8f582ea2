package brokertest

import (
	"bytes"
	"net"
	"net/url"
	"slices"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in front of the test PostgreSQL server that can cut
// some of its connections without a word: no RST, no FIN, nothing passes
// either way — a network partition as the connection's owner sees it.
// Which connections it cuts is told by the application_name their startup
// message carries (a broker's LISTEN connections have their own).
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	cut    []byte // "application_name\x00<name>\x00" of the connections cut; nil: none
	closed bool
	conns  []net.Conn
}

// NewProxy starts a proxy to the server of databaseURL, stopped when the
// test ends, and returns it with databaseURL pointed at it.
func NewProxy(t testing.TB, databaseURL string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: u.Host}
	p.cond = sync.NewCond(&p.mu)
	go p.accept()
	t.Cleanup(p.close)
	u.Host = ln.Addr().String()
	return p, u.String()
}

// Cut stops, from now, all traffic of the connections whose startup named
// the application name, open ones and new ones alike. Their bytes are held,
// not dropped, as TCP would hold them.
func (p *Proxy) Cut(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = []byte("application_name\x00" + name + "\x00")
}

// Heal lets everything through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = nil
	p.cond.Broadcast()
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.cond.Broadcast()
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			client.Close()
			server.Close()
			return
		}
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		startup := &startupSeen{}
		go p.pump(server, client, startup, true)
		go p.pump(client, server, startup, false)
	}
}

// startupSeen keeps the first bytes a client sent: its startup message.
type startupSeen struct {
	mu  sync.Mutex
	buf []byte
}

// maxStartup is how much of a connection's first bytes the proxy keeps to
// match application names against.
const maxStartup = 4096

// pump copies src to dst, holding each chunk while the connection is cut.
func (p *Proxy) pump(dst, src net.Conn, startup *startupSeen, fromClient bool) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if fromClient {
				startup.mu.Lock()
				if len(startup.buf) < maxStartup {
					startup.buf = append(startup.buf, buf[:min(n, maxStartup-len(startup.buf))]...)
				}
				startup.mu.Unlock()
			}
			if !p.hold(startup) {
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// hold waits while the connection is cut; false when the proxy closed.
func (p *Proxy) hold(startup *startupSeen) bool {
	startup.mu.Lock()
	seen := slices.Clone(startup.buf) // the client's pump appends to it meanwhile
	startup.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && p.cut != nil && bytes.Contains(seen, p.cut) {
		p.cond.Wait()
	}
	return !p.closed
}
