package integration

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
	"github.com/claudemesh/claudemesh-go/transport/join"
)

// Deadlines of the end-to-end tests.
const (
	e2eConnectDeadline  = 10 * time.Second // a daemon's first broker connection
	e2eDeliverDeadline  = 10 * time.Second // one message through the broker
	e2eRecoveryDeadline = 20 * time.Second // bulk delivery across restarts
	e2eDMLatencyBound   = time.Second      // 202 at alice → event at bob
)

// e2eMesh is a real broker process (on SQLite, or on PostgreSQL with
// newE2EMeshOnPostgres) with a mesh "demo" that alice and bob joined with
// `claudemesh join`; their daemons are started by the test (peer.start).
type e2eMesh struct {
	t         *testing.T
	brokerEnv *env
	brokerDir string   // the broker's directory (SQLite)
	brokerDB  string   // or its database URL (PostgreSQL)
	store     []string // the flags naming either, for `broker up` and the CLI
	invite    string   // the invite URL members join with
	broker    *brokerProc
	alice     *e2ePeer
	bob       *e2ePeer
}

// e2ePeer is one member: its directories, its key and its daemon.
type e2ePeer struct {
	name   string
	env    *env
	pubkey string
	d      *daemonProc
	c      *http.Client
}

// newE2EMesh starts the broker on SQLite, provisions the mesh and joins
// alice and bob into fresh config directories. No daemon runs yet.
func newE2EMesh(t *testing.T) *e2eMesh {
	t.Helper()
	m := &e2eMesh{t: t, brokerEnv: newEnv(t)}
	m.brokerDir = filepath.Join(m.brokerEnv.daemonDir, "broker")
	m.store = []string{"--dir", m.brokerDir}
	return m.provision()
}

// newE2EMeshOnPostgres is newE2EMesh with the broker on PostgreSQL (a
// schema of the test's own).
func newE2EMeshOnPostgres(t *testing.T) *e2eMesh {
	t.Helper()
	m := &e2eMesh{t: t, brokerEnv: newEnv(t), brokerDB: brokertest.PostgresURL(t)}
	m.store = []string{"--database-url", m.brokerDB}
	return m.provision()
}

// e2eBackends are the broker's stores a test that runs on both runs on:
// SQLite (newE2EMesh) and PostgreSQL (newE2EMeshOnPostgres).
var e2eBackends = []struct {
	name string
	mesh func(*testing.T) *e2eMesh
}{{"sqlite", newE2EMesh}, {"postgres", newE2EMeshOnPostgres}}

// brokerCLI runs `claudemesh broker <args>` on the mesh's broker store.
func (m *e2eMesh) brokerCLI(args ...string) cliResult {
	m.t.Helper()
	return runCLI(m.t, m.brokerEnv, append(append([]string{"broker"}, args...), m.store...)...)
}

func (m *e2eMesh) provision() *e2eMesh {
	t := m.t
	t.Helper()
	m.broker = startBrokerProc(t, m.brokerEnv, e2eBrokerArgs(m.store)...)
	base := "http://" + m.broker.addr

	r := m.brokerCLI("mesh", "create", "demo")
	if r.code != 0 || !regexp.MustCompile(`^created mesh demo \(id [0-9A-Z]{26}\)\n$`).MatchString(r.stdout) {
		t.Fatalf("broker mesh create: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	r = m.brokerCLI("invite", "demo", "--uses", "3", "--broker-url", base)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	m.invite = lines[len(lines)-1]
	if _, err := join.ParseLink(m.invite); r.code != 0 || err != nil {
		t.Fatalf("broker invite: exit %d, %v\nstdout %q\nstderr %s", r.code, err, r.stdout, r.stderr)
	}
	m.alice, m.bob = m.join("alice"), m.join("bob")
	return m
}

// join makes a member of the mesh in a fresh config directory with
// `claudemesh join` (the invite has a use left for a third, after alice
// and bob). Its daemon is not started.
func (m *e2eMesh) join(name string) *e2ePeer {
	t := m.t
	t.Helper()
	e := newEnv(t)
	// newEnv wrote an offline `local` membership; a delivery test wants the
	// one `claudemesh join` records, alone.
	if err := os.Remove(filepath.Join(e.configDir, "config.json")); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, e, "join", m.invite, "--name", name); r.code != 0 || !strings.Contains(r.stdout, "joined mesh demo") {
		t.Fatalf("join --name %s: exit %d\nstdout %q\nstderr %s", name, r.code, r.stdout, r.stderr)
	}
	return &e2ePeer{name: name, env: e, pubkey: joinedMember(t, e, "demo").Pubkey}
}

// e2eBrokerArgs are the broker's flags: its store, and a rate limit far
// above what the tests send (with resends across broker restarts they can
// near the default, 6,000 a minute per mesh), so that no test waits out a
// window.
func e2eBrokerArgs(store []string) []string {
	return append(slices.Clone(store), "--rate-limit", "1000000")
}

// killBroker SIGKILLs the broker process and waits until it is reaped.
func (m *e2eMesh) killBroker() {
	m.t.Helper()
	stopBroker(m.t, m.broker, syscall.SIGKILL)
}

// stopBroker sends b sig and waits (stopDeadline) until it has exited and
// been reaped.
func stopBroker(t *testing.T, b *brokerProc, sig syscall.Signal) {
	t.Helper()
	if err := b.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%v to the broker: %v", sig, err)
	}
	select {
	case <-b.done:
	case <-time.After(stopDeadline):
		t.Fatalf("broker still running %s after %v", stopDeadline, sig)
	}
}

// restartBroker starts the broker again on the same address and directory.
func (m *e2eMesh) restartBroker() {
	m.t.Helper()
	addr := m.broker.addr
	m.broker = startBrokerProc(m.t, m.brokerEnv, append(e2eBrokerArgs(m.store), "--listen", addr)...)
	if m.broker.addr != addr {
		m.t.Fatalf("restarted broker listens on %s, want %s", m.broker.addr, addr)
	}
}

// start runs the peer's foreground daemon (socket only) and waits until its
// broker connection is up.
func (p *e2ePeer) start(t *testing.T, args ...string) {
	t.Helper()
	p.d = startDaemon(t, p.env, append([]string{"--no-tcp"}, args...)...)
	if p.c != nil {
		p.c.CloseIdleConnections()
	}
	p.c = unixClient(p.env.socket())
	t.Cleanup(p.c.CloseIdleConnections)
	p.waitConnected(t)
}

// connected reports whether GET /v1/health says every mesh is connected.
func (p *e2ePeer) connected() bool {
	var h struct {
		Meshes []struct {
			Connected bool `json:"connected"`
		} `json:"meshes"`
	}
	st, _, err := getJSON(p.c, "http://localhost/v1/health", &h)
	if err != nil || st != http.StatusOK || len(h.Meshes) == 0 {
		return false
	}
	for _, m := range h.Meshes {
		if !m.Connected {
			return false
		}
	}
	return true
}

func (p *e2ePeer) waitConnected(t *testing.T) {
	t.Helper()
	if err := wait.Until(e2eConnectDeadline, p.name+"'s daemon connected to the broker", func() bool {
		if p.connected() {
			return true
		}
		if p.d.exited() {
			t.Fatalf("%s's daemon exited (%v); stderr:\n%s", p.name, p.d.waitErr, p.d.stderr)
		}
		return false
	}); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, p.d.stderr)
	}
}

// trySend posts one DM; safe from any goroutine (no t.Fatal).
func trySend(c *http.Client, to, body, id string) (int, []byte, error) {
	b, err := json.Marshal(map[string]any{"to": to, "message": body, "client_message_id": id})
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.Post("http://localhost/v1/send", "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// inboxAll pages through GET /v1/inbox (oldest first) with the after cursor.
func inboxAll(t *testing.T, c *http.Client) []messages.InboxItem {
	t.Helper()
	var all []messages.InboxItem
	after := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("GET /v1/inbox never returned a last page")
		}
		url := "http://localhost/v1/inbox?limit=" + strconv.Itoa(e2eInboxPage)
		if after != "" {
			url += "&after=" + after
		}
		var page messages.InboxPage
		st, _, err := getJSON(c, url, &page)
		if err != nil || st != http.StatusOK {
			t.Fatalf("GET %s: status %d, err %v", url, st, err)
		}
		all = append(all, page.Items...)
		if page.Next == "" {
			return all
		}
		if page.Next == after {
			t.Fatalf("GET %s: next cursor did not move", url)
		}
		after = page.Next
	}
}

// e2eInboxPage is odd so that a thousand rows take several pages.
const e2eInboxPage = 173

// inboxCounts counts inbox rows by client_message_id.
func inboxCounts(items []messages.InboxItem) map[string]int {
	n := make(map[string]int, len(items))
	for _, it := range items {
		n[it.ClientMessageID]++
	}
	return n
}

// meshHealth is the part of GET /v1/health the tests read.
type meshHealth struct {
	Connected  bool `json:"connected"`
	QueueDepth int  `json:"queue_depth"`
	Inflight   int  `json:"inflight"`
	Dead       int  `json:"dead"`
}

func health(t *testing.T, c *http.Client) meshHealth {
	t.Helper()
	var h struct {
		Meshes []meshHealth `json:"meshes"`
	}
	st, _, err := getJSON(c, "http://localhost/v1/health", &h)
	if err != nil || st != http.StatusOK || len(h.Meshes) != 1 {
		t.Fatalf("GET /v1/health: status %d, %v, %+v", st, err, h)
	}
	return h.Meshes[0]
}

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	ID   int64 // 0 when the frame had no id line
	Name string
	Data []byte
	At   time.Time // when the reader parsed it
}

// sseStream reads GET /v1/events over a Unix socket in a goroutine.
type sseStream struct {
	t      *testing.T
	cancel context.CancelFunc
	events chan sseEvent
	done   chan struct{}
	err    error // why the reader stopped; read after done
}

// openSSE opens the event stream (resuming after lastEventID when it is not
// empty) and returns once the daemon answered 200: the subscription exists.
func openSSE(t *testing.T, sock, lastEventID string) *sseStream {
	t.Helper()
	var dialer net.Dialer
	c := &http.Client{Transport: &http.Transport{
		DialContext:           func(ctx context.Context, _, _ string) (net.Conn, error) { return dialer.DialContext(ctx, "unix", sock) },
		ResponseHeaderTimeout: 5 * time.Second,
	}}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost/v1/events", nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET /v1/events: %v", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET /v1/events: status %d, Content-Type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &sseStream{t: t, cancel: cancel, events: make(chan sseEvent, 1<<14), done: make(chan struct{})}
	go s.read(resp.Body)
	t.Cleanup(s.close)
	return s
}

// read parses frames: "id:", "event:", "data:" lines, a blank line ends
// one; comments (":") are skipped.
func (s *sseStream) read(body io.ReadCloser) {
	defer close(s.done)
	defer close(s.events)
	defer body.Close()
	br := bufio.NewReader(body)
	var cur sseEvent
	var data [][]byte
	seen := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			s.err = err
			return
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if seen {
				cur.Data, cur.At = bytes.Join(data, []byte("\n")), time.Now()
				s.events <- cur
			}
			cur, data, seen = sseEvent{}, nil, false
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		seen = true
		switch field {
		case "id":
			n, perr := strconv.ParseInt(value, 10, 64)
			if perr != nil {
				s.err = fmt.Errorf("id line %q: %v", line, perr)
				return
			}
			cur.ID = n
		case "event":
			cur.Name = value
		case "data":
			data = append(data, []byte(value))
		}
	}
}

// close disconnects and waits for the reader.
func (s *sseStream) close() {
	s.cancel()
	<-s.done
}

// next returns the next event named name, passing over others; it fails
// the test after within.
func (s *sseStream) next(name string, within time.Duration) sseEvent {
	s.t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				<-s.done
				s.t.Fatalf("event stream ended while waiting for %q: %v", name, s.err)
			}
			if ev.Name == name {
				return ev
			}
		case <-timer.C:
			s.t.Fatalf("no %q event within %s", name, within)
		}
	}
}

// messageOf decodes the data of a "message" event.
func messageOf(t *testing.T, ev sseEvent) messages.InboxItem {
	t.Helper()
	var it messages.InboxItem
	if err := json.Unmarshal(ev.Data, &it); err != nil {
		t.Fatalf("message event %d: data is not an inbox item: %v: %q", ev.ID, err, ev.Data)
	}
	return it
}

// diagnose describes where each client_message_id is: alice's outbox row
// and the broker's message and delivery rows to bob (read beside the
// running broker, which WAL allows). For failure messages.
func (m *e2eMesh) diagnose(t *testing.T, ids []string) string {
	t.Helper()
	return m.diagnoseFor(t, m.bob, ids)
}

// diagnoseFor is diagnose with the delivery rows of recipient.
func (m *e2eMesh) diagnoseFor(t *testing.T, recipient *e2ePeer, ids []string) string {
	t.Helper()
	slices.Sort(ids)
	if len(ids) > 10 {
		ids = ids[:10]
	}
	rows := byClientID(listAll(t, m.alice.c, ""))
	driver, source, query := "sqlite", "file:"+filepath.Join(m.brokerDir, "broker.db")+"?_pragma=busy_timeout(5000)&_pragma=query_only(ON)",
		`SELECT m.id, d.attempts, d.delivered_at, d.lease_expires_at FROM message m
		 LEFT JOIN delivery_queue d ON d.message_id = m.id AND d.recipient_pubkey = ? WHERE m.client_message_id = ?`
	if m.brokerDB != "" {
		driver, source, query = "pgx", m.brokerDB, `SELECT m.id, d.attempts,
		 (extract(epoch FROM d.delivered_at) * 1000)::bigint, (extract(epoch FROM d.lease_expires_at) * 1000)::bigint
		 FROM message m LEFT JOIN delivery_queue d ON d.message_id = m.id AND d.recipient_pubkey = $1 WHERE m.client_message_id = $2`
	}
	db, err := sql.Open(driver, source)
	if err != nil {
		return err.Error()
	}
	defer db.Close()
	var b strings.Builder
	now := time.Now().UnixMilli()
	for _, id := range ids {
		r, ok := rows[id]
		fmt.Fprintf(&b, "%s: alice's row", id)
		if ok {
			fmt.Fprintf(&b, " %s attempts %d bmid %s last_error %s;", r.Status, r.Attempts, messages.Deref(r.BrokerMessageID), messages.Deref(r.LastError))
		} else {
			b.WriteString(" absent;")
		}
		q, err := db.Query(query, recipient.pubkey, id)
		if err != nil {
			fmt.Fprintf(&b, " broker: %v\n", err)
			continue
		}
		n := 0
		for q.Next() {
			n++
			var mid string
			var attempts, delivered, lease sql.NullInt64
			if err := q.Scan(&mid, &attempts, &delivered, &lease); err != nil {
				fmt.Fprintf(&b, " scan: %v", err)
				break
			}
			fmt.Fprintf(&b, " broker message %s delivery attempts %v delivered %v", mid, attempts.Int64, delivered.Valid)
			if lease.Valid && !delivered.Valid && lease.Int64 > now {
				fmt.Fprintf(&b, ", leased for another %dms (a push that never reached its recipient waits for the lease)", lease.Int64-now)
			}
			b.WriteByte(';')
		}
		q.Close()
		if n == 0 {
			b.WriteString(" no broker message;")
		}
		b.WriteByte('\n')
	}
	return b.String()
}
