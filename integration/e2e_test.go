package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/oklog/ulid/v2"

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
	if _, err := join.ParseInviteURL(m.invite); r.code != 0 || err != nil {
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
	m.signalBroker(syscall.SIGKILL)
}

// signalBroker sends the broker sig and waits (stopDeadline) until it has
// exited and been reaped.
func (m *e2eMesh) signalBroker(sig syscall.Signal) {
	m.t.Helper()
	if err := m.broker.cmd.Process.Signal(sig); err != nil {
		m.t.Fatalf("%v to the broker: %v", sig, err)
	}
	select {
	case <-m.broker.done:
	case <-time.After(stopDeadline):
		m.t.Fatalf("broker still running %s after %v", stopDeadline, sig)
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
	deadline := time.Now().Add(e2eConnectDeadline)
	for !p.connected() {
		if p.d.exited() {
			t.Fatalf("%s's daemon exited (%v); stderr:\n%s", p.name, p.d.waitErr, p.d.stderr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's daemon not connected to the broker after %s; stderr:\n%s", p.name, e2eConnectDeadline, p.d.stderr)
		}
		time.Sleep(pollInterval) // poll interval; the condition is re-checked
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

// pollUntil re-checks cond every `every` until it holds, failing after within.
func pollUntil(t *testing.T, within, every time.Duration, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what())
		}
		time.Sleep(every) // poll interval; the condition is re-checked
	}
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
			fmt.Fprintf(&b, " %s attempts %d bmid %s last_error %s;", r.Status, r.Attempts, deref(r.BrokerMessageID), deref(r.LastError))
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

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestE2EDirectMessage: a DM from alice's daemon reaches bob's event stream
// within a second of the 202, once in his inbox, and alice's outbox row is
// done with the broker_message_id bob's row carries; a retry of the same id
// and body changes nothing at bob.
func TestE2EDirectMessage(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)
	stream := openSSE(t, bob.env.socket(), "")

	const plaintext = "hello bob — end to end through two daemons and a broker"
	st, body, err := trySend(alice.c, bob.pubkey, plaintext, "dm-1")
	accepted := time.Now()
	if err != nil || st != http.StatusAccepted {
		t.Fatalf("send dm-1: status %d, %v: %s", st, err, body)
	}
	ev := stream.next("message", e2eDeliverDeadline)
	latency := max(ev.At.Sub(accepted), 0)
	t.Logf("DM latency (202 at alice → message event at bob): %s", latency)
	if latency > e2eDMLatencyBound {
		t.Errorf("DM latency %s, want ≤ %s", latency, e2eDMLatencyBound)
	}
	got := messageOf(t, ev)
	if got.Body == nil || *got.Body != plaintext || got.ClientMessageID != "dm-1" || got.SenderPubkey != alice.pubkey ||
		got.SenderName != "alice" || got.Mesh != "demo" || got.Kind != "dm" || got.BrokerMessageID == "" || ev.ID <= 0 {
		t.Fatalf("bob's message event id %d: %s", ev.ID, ev.Data)
	}

	rows := inboxAll(t, bob.c)
	if n := inboxCounts(rows)["dm-1"]; n != 1 || len(rows) != 1 {
		t.Fatalf("bob's inbox holds dm-1 %d times (%d rows), want once", n, len(rows))
	}
	if rows[0].BrokerMessageID != got.BrokerMessageID || rows[0].Body == nil || *rows[0].Body != plaintext {
		t.Fatalf("bob's inbox row %+v does not match the event %s", rows[0], ev.Data)
	}

	var row outboxItem
	waitFor(t, e2eDeliverDeadline, "alice's dm-1 row to be done", func() bool {
		r, ok := byClientID(listAll(t, alice.c, "done"))["dm-1"]
		row = r
		return ok
	})
	if row.Status != messages.StatusDone || row.BrokerMessageID == nil || *row.BrokerMessageID != rows[0].BrokerMessageID ||
		row.To != bob.pubkey || row.DeliveredAt == nil {
		t.Fatalf("alice's outbox row %+v, want done with broker_message_id %s", row, rows[0].BrokerMessageID)
	}

	// The same id and body again: a duplicate (200) or, by row state, 202.
	st, body, err = trySend(alice.c, bob.pubkey, plaintext, "dm-1")
	if err != nil || (st != http.StatusOK && st != http.StatusAccepted) {
		t.Fatalf("resend dm-1: status %d, %v: %s", st, err, body)
	}
	if st == http.StatusOK {
		var dup messages.SendDuplicate
		if err := json.Unmarshal(body, &dup); err != nil || !dup.Duplicate || dup.BrokerMessageID == nil ||
			*dup.BrokerMessageID != rows[0].BrokerMessageID {
			t.Fatalf("resend dm-1: 200 %s, want duplicate of %s", body, rows[0].BrokerMessageID)
		}
	}
	// A marker after the retry: once bob has it, a redelivery of dm-1 would
	// have been stored (or deduplicated) already.
	if st, body, err := trySend(alice.c, bob.pubkey, "marker", "dm-2"); err != nil || st != http.StatusAccepted {
		t.Fatalf("send dm-2: status %d, %v: %s", st, err, body)
	}
	if it := messageOf(t, stream.next("message", e2eDeliverDeadline)); it.ClientMessageID != "dm-2" {
		t.Fatalf("bob's next message event is %s, want the marker dm-2", it.ClientMessageID)
	}
	waitFor(t, e2eDeliverDeadline, "alice's outbox to settle", func() bool {
		h := health(t, alice.c)
		return h.QueueDepth == 0 && h.Inflight == 0
	})
	counts := inboxCounts(inboxAll(t, bob.c))
	if counts["dm-1"] != 1 || counts["dm-2"] != 1 || len(counts) != 2 {
		t.Fatalf("bob's inbox after the retry: %v, want dm-1 and dm-2 once each", counts)
	}

	// The metrics say the same (GET /v1/metrics).
	scrape := func(p *e2ePeer) string {
		t.Helper()
		resp, err := p.c.Get("http://localhost/v1/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s's GET /v1/metrics: %d %s", p.name, resp.StatusCode, raw)
		}
		return string(raw)
	}
	for _, c := range []struct {
		p    *e2ePeer
		want []string
	}{
		{bob, []string{`cm_daemon_recv_total{from_type="peer",kind="dm",mesh="demo"} 2`, `cm_daemon_connected{mesh="demo"} 1`,
			`cm_daemon_store_commit_seconds_count{db="inbox",durability="wal_sync"}`}},
		{alice, []string{`cm_daemon_dispatch_seconds_count{mesh="demo",outcome="done"}`, `cm_daemon_connected{mesh="demo"} 1`,
			`cm_daemon_outbox_depth{mesh="demo",status="pending"} 0`, `cm_daemon_send_total{kind="dm",mesh="demo",status="queued"} 2`}},
	} {
		text := scrape(c.p)
		for _, w := range c.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s's metrics lack %s", c.p.name, w)
			}
		}
	}
	if r := runCLI(t, alice.env, "daemon", "metrics"); r.code != 0 || !strings.Contains(r.stdout, `cm_daemon_send_total{kind="dm",mesh="demo"`) {
		t.Errorf("claudemesh daemon metrics: exit %d\nstdout %.300q\nstderr %s", r.code, r.stdout, r.stderr)
	}
}

// TestE2EBrokerRestarts: 1,000 DMs sent from 8 goroutines while the broker
// is SIGKILLed twice and restarted on the same port and directory all end
// done at alice and exactly once at bob.
func TestE2EBrokerRestarts(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)

	const total, senders = 1000, 8
	var next, accepted atomic.Int64
	var errMu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	// Pacing (not synchronization): about 330 sends a second, so that both
	// kills land while sends are still coming and deliveries are in flight.
	pace := time.NewTicker(3 * time.Millisecond)
	defer pace.Stop()
	for range senders {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= total {
					return
				}
				<-pace.C
				id := fmt.Sprintf("bulk-%04d", i)
				st, body, err := trySend(alice.c, bob.pubkey, "bulk message "+id, id)
				if err != nil || st != http.StatusAccepted {
					errMu.Lock()
					errs = append(errs, fmt.Sprintf("%s: status %d, %v: %s", id, st, err, body))
					errMu.Unlock()
					continue
				}
				accepted.Add(1)
			}
		})
	}
	start := time.Now()
	for _, at := range []int64{300, 600} {
		// Both daemons are connected when the broker dies: the kill cuts
		// live links with sends in flight.
		waitFor(t, e2eRecoveryDeadline, fmt.Sprintf("%d accepted sends with both daemons connected", at), func() bool {
			return accepted.Load() >= at && alice.connected() && bob.connected()
		})
		m.killBroker()
		t.Logf("broker SIGKILLed after %d accepted sends (%s)", accepted.Load(), time.Since(start).Round(time.Millisecond))
		m.restartBroker()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d sends were not answered 202, first: %s", len(errs), errs[0])
	}
	t.Logf("1000 sends accepted in %s", time.Since(start).Round(time.Millisecond))
	if n := strings.Count(alice.d.stderr.String(), `"msg":"broker_disconnected"`); n < 2 {
		t.Errorf("alice's daemon logged %d broker_disconnected, want one per kill (2)", n)
	}

	var h meshHealth
	pollUntil(t, e2eRecoveryDeadline, 50*time.Millisecond,
		func() string { return fmt.Sprintf("alice's outbox to drain (last health %+v)", h) },
		func() bool {
			h = health(t, alice.c)
			if h.Dead > 0 {
				t.Fatalf("alice's outbox has %d dead rows: %+v", h.Dead, listAll(t, alice.c, messages.StatusDead))
			}
			return h.QueueDepth == 0 && h.Inflight == 0
		})
	done := listAll(t, alice.c, messages.StatusDone)
	if len(done) != total {
		t.Fatalf("alice's outbox has %d done rows, want %d", len(done), total)
	}
	var counts map[string]int
	var rows int
	pollUntil(t, e2eRecoveryDeadline, 100*time.Millisecond,
		func() string {
			var missing []string
			for i := range total {
				if id := fmt.Sprintf("bulk-%04d", i); counts[id] == 0 {
					missing = append(missing, id)
				}
			}
			return fmt.Sprintf("bob's inbox to hold %d ids (has %d ids in %d rows); missing:\n%s", total, len(counts), rows,
				m.diagnose(t, missing))
		},
		func() bool {
			items := inboxAll(t, bob.c)
			counts, rows = inboxCounts(items), len(items)
			return len(counts) >= total
		})
	t.Logf("all %d delivered %s after the first send", total, time.Since(start).Round(time.Millisecond))
	if rows != total || len(counts) != total {
		t.Fatalf("bob's inbox: %d rows, %d distinct ids; want %d of each", rows, len(counts), total)
	}
	for i := range total {
		if id := fmt.Sprintf("bulk-%04d", i); counts[id] != 1 {
			t.Fatalf("bob's inbox holds %s %d times", id, counts[id])
		}
	}
	// Every done row's broker_message_id is the one bob stored.
	bobIDs := map[string]string{}
	for _, it := range inboxAll(t, bob.c) {
		bobIDs[it.ClientMessageID] = it.BrokerMessageID
	}
	for _, r := range done {
		if r.BrokerMessageID == nil || *r.BrokerMessageID != bobIDs[r.ClientMessageID] {
			t.Fatalf("alice's row %s has broker_message_id %v, bob stored %q", r.ClientMessageID, r.BrokerMessageID, bobIDs[r.ClientMessageID])
		}
	}
}

// TestE2EDaemonKill9: alice's daemon is SIGKILLed while 4 goroutines send;
// after a restart every send it answered 202 reaches bob exactly once.
func TestE2EDaemonKill9(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)

	var next atomic.Int64
	var mu sync.Mutex
	accepted := map[string]bool{}  // answered 202
	attempted := map[string]bool{} // posted, whatever the answer
	var stop atomic.Bool
	var wg sync.WaitGroup
	c := unixClient(alice.env.socket())
	defer c.CloseIdleConnections()
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				id := fmt.Sprintf("crash-%05d", next.Add(1))
				mu.Lock()
				attempted[id] = true
				mu.Unlock()
				st, _, err := trySend(c, bob.pubkey, "sent across a kill -9: "+id, id)
				if err != nil {
					return // the daemon is gone: the answer is unknown
				}
				if st == http.StatusAccepted {
					mu.Lock()
					accepted[id] = true
					mu.Unlock()
				}
			}
		})
	}
	nAccepted := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted)
	}
	waitFor(t, e2eDeliverDeadline, "200 accepted sends", func() bool { return nAccepted() >= 200 })
	alice.d.kill9()
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	acc := len(accepted)
	mu.Unlock()
	t.Logf("alice's daemon SIGKILLed: %d sends answered 202, %d attempted", acc, len(attempted))

	alice.start(t)
	var counts map[string]int
	missing := 0
	pollUntil(t, e2eRecoveryDeadline, 50*time.Millisecond,
		func() string {
			var ids []string
			for id := range accepted {
				if counts[id] == 0 {
					ids = append(ids, id)
				}
			}
			return fmt.Sprintf("bob's inbox to hold every 202'd id (%d missing):\n%s", missing, m.diagnose(t, ids))
		},
		func() bool {
			counts = inboxCounts(inboxAll(t, bob.c))
			missing = 0
			for id := range accepted {
				if counts[id] == 0 {
					missing++
				}
			}
			return missing == 0
		})
	for id, n := range counts {
		if n != 1 {
			t.Errorf("bob's inbox holds %s %d times", id, n)
		}
		if !attempted[id] {
			t.Errorf("bob's inbox holds %s, which was never sent", id)
		}
	}
	// Alice's rows of the accepted sends all end done (inflight ones at the
	// kill are recovered and resent; the broker answers them duplicate).
	pollUntil(t, e2eRecoveryDeadline, 50*time.Millisecond, func() string { return "alice's outbox to drain" }, func() bool {
		h := health(t, alice.c)
		return h.QueueDepth == 0 && h.Inflight == 0
	})
	done := byClientID(listAll(t, alice.c, messages.StatusDone))
	for id := range accepted {
		if _, ok := done[id]; !ok {
			t.Errorf("alice's outbox has no done row for 202'd %s", id)
		}
	}
}

// TestE2ESSEResume: a stream resumed with Last-Event-ID delivers exactly the
// events after that id, in order, then live ones.
func TestE2ESSEResume(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)

	send := func(id string) {
		t.Helper()
		if st, body, err := trySend(alice.c, bob.pubkey, "resume "+id, id); err != nil || st != http.StatusAccepted {
			t.Fatalf("send %s: status %d, %v: %s", id, st, err, body)
		}
	}
	first := openSSE(t, bob.env.socket(), "")
	for i := 1; i <= 4; i++ {
		send(fmt.Sprintf("r-%d", i))
	}
	var seen []sseEvent
	for len(seen) < 3 {
		seen = append(seen, first.next("message", e2eDeliverDeadline))
	}
	mark := seen[2].ID
	first.close()
	for i := 5; i <= 9; i++ {
		send(fmt.Sprintf("r-%d", i))
	}
	waitFor(t, e2eDeliverDeadline, "bob's inbox to hold r-1…r-9", func() bool { return len(inboxCounts(inboxAll(t, bob.c))) == 9 })

	// The whole log, replayed from 0, says what "after mark" is.
	full := openSSE(t, bob.env.socket(), "0")
	var all []sseEvent
	for len(all) < 9 {
		all = append(all, full.next("message", e2eDeliverDeadline))
	}
	full.close()
	for i, ev := range all {
		if i > 0 && ev.ID <= all[i-1].ID {
			t.Fatalf("replay from 0: event %d after %d", ev.ID, all[i-1].ID)
		}
		if i < 3 && (ev.ID != seen[i].ID || !bytes.Equal(ev.Data, seen[i].Data)) {
			t.Fatalf("replay from 0: event %d is %d %s, the live stream had %d %s", i, ev.ID, ev.Data, seen[i].ID, seen[i].Data)
		}
	}
	want := all[3:]

	resumed := openSSE(t, bob.env.socket(), strconv.FormatInt(mark, 10))
	for i, w := range want {
		ev := resumed.next("message", e2eDeliverDeadline)
		if ev.ID != w.ID || !bytes.Equal(ev.Data, w.Data) {
			t.Fatalf("resumed event %d: id %d %s, want id %d %s", i, ev.ID, ev.Data, w.ID, w.Data)
		}
	}
	send("r-10")
	ev := resumed.next("message", e2eDeliverDeadline)
	if it := messageOf(t, ev); it.ClientMessageID != "r-10" || ev.ID <= want[len(want)-1].ID {
		t.Fatalf("after the replay the stream delivered %d %s, want the live r-10", ev.ID, ev.Data)
	}
	// The three seen before the disconnect and the missed ones are r-1…r-9,
	// each once.
	got := map[string]int{}
	for _, ev := range append(slices.Clone(seen[:3]), want...) {
		got[messageOf(t, ev).ClientMessageID]++
	}
	for i := 1; i <= 9; i++ {
		if id := fmt.Sprintf("r-%d", i); got[id] != 1 {
			t.Errorf("%s appears %d times among the seen and the missed events", id, got[id])
		}
	}

	// Across a restart of bob's daemon: the id sequence moves on (it jumps
	// at each start), and a reader resuming from the last id it saw gets
	// what came while it was away, exactly.
	resumed.close()
	last := ev.ID
	bob.d.stop()
	bob.start(t)
	send("r-11")
	waitFor(t, e2eDeliverDeadline, "bob's inbox to hold r-11", func() bool { return len(inboxCounts(inboxAll(t, bob.c))) == 11 })
	after := openSSE(t, bob.env.socket(), strconv.FormatInt(last, 10))
	defer after.close()
	ev = after.next("message", e2eDeliverDeadline)
	if it := messageOf(t, ev); it.ClientMessageID != "r-11" || ev.ID <= last+1 {
		t.Fatalf("resumed after the restart from %d: %d %s, want r-11 past a jump in the ids", last, ev.ID, ev.Data)
	}
}

// TestE2EPresence: bob's daemon coming up after alice's shows as peer_join
// on alice's stream, and alice's peer list names bob.
func TestE2EPresence(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	stream := openSSE(t, alice.env.socket(), "")
	bob.start(t)

	deadline := time.Now().Add(e2eDeliverDeadline)
	for {
		ev := stream.next("peer_join", time.Until(deadline))
		var d map[string]string
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatalf("peer_join data %q: %v", ev.Data, err)
		}
		if d["pubkey"] == bob.pubkey {
			if d["mesh"] != "demo" || d["display_name"] != "bob" || ev.ID <= 0 {
				t.Errorf("peer_join %d for bob: %s", ev.ID, ev.Data)
			}
			break
		}
	}

	var peers struct {
		Peers []struct {
			Mesh         string `json:"mesh"`
			Pubkey       string `json:"pubkey"`
			MemberPubkey string `json:"memberPubkey"`
			DisplayName  string `json:"displayName"`
		} `json:"peers"`
	}
	st, _, err := getJSON(alice.c, "http://localhost/v1/peers", &peers)
	if err != nil || st != http.StatusOK {
		t.Fatalf("GET /v1/peers: %d %v", st, err)
	}
	found := false
	for _, p := range peers.Peers {
		if p.Pubkey == bob.pubkey || p.MemberPubkey == bob.pubkey {
			found = true
			if p.Mesh != "demo" || p.DisplayName != "bob" {
				t.Errorf("alice's peer entry for bob: %+v", p)
			}
		}
	}
	if !found {
		t.Fatalf("alice's GET /v1/peers does not list bob (%s): %+v", bob.pubkey, peers)
	}
	if r := runCLI(t, alice.env, "peers", "--mesh", "demo"); r.code != 0 || !strings.Contains(r.stdout, bob.pubkey) ||
		!strings.Contains(r.stdout, "bob") {
		t.Errorf("claudemesh peers: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Bob sets his profile; GET /v1/profile reads it back from the broker,
	// and alice's peer list shows it.
	r := do(t, bob.c, newRequest(t, http.MethodPost, "http://localhost/v1/profile",
		[]byte(`{"status":"working","summary":"reviewing #12","title":"reviewer","capabilities":["go","sql"]}`)))
	if r.status != http.StatusOK {
		t.Fatalf("bob's POST /v1/profile: %d %s", r.status, r.body)
	}
	var own struct {
		Profiles []struct {
			Mesh         string   `json:"mesh"`
			MemberPubkey string   `json:"member_pubkey"`
			Status       string   `json:"status"`
			Summary      string   `json:"summary"`
			Title        string   `json:"title"`
			Capabilities []string `json:"capabilities"`
		} `json:"profiles"`
	}
	if st, _, err := getJSON(bob.c, "http://localhost/v1/profile", &own); err != nil || st != http.StatusOK || len(own.Profiles) != 1 {
		t.Fatalf("bob's GET /v1/profile: %d %v %+v", st, err, own)
	}
	if p := own.Profiles[0]; p.Mesh != "demo" || p.MemberPubkey != bob.pubkey || p.Status != "working" ||
		p.Summary != "reviewing #12" || p.Title != "reviewer" || strings.Join(p.Capabilities, ",") != "go,sql" {
		t.Errorf("bob's profile: %+v", p)
	}
	var seen struct {
		Peers []struct {
			MemberPubkey string `json:"memberPubkey"`
			Summary      string `json:"summary"`
		} `json:"peers"`
	}
	if _, _, err := getJSON(alice.c, "http://localhost/v1/peers?mesh=demo", &seen); err != nil {
		t.Fatal(err)
	}
	shown := false
	for _, p := range seen.Peers {
		shown = shown || p.MemberPubkey == bob.pubkey && p.Summary == "reviewing #12"
	}
	if !shown {
		t.Errorf("alice's peer list does not show bob's summary: %+v", seen.Peers)
	}
}

// upstreamStandIn imitates the upstream TypeScript broker where it matters:
// hello → hello_ack; feature_negotiation_request is ignored (unknown to it);
// send → {type:"ack", id, messageId, queued:true}.
type upstreamStandIn struct {
	srv          *httptest.Server
	mu           sync.Mutex
	hellos       int
	negotiations int
	sends        []map[string]any
}

func newUpstreamStandIn(t *testing.T) *upstreamStandIn {
	u := &upstreamStandIn{}
	up := websocket.Upgrader{}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			var f map[string]any
			if err := ws.ReadJSON(&f); err != nil {
				return
			}
			u.mu.Lock()
			var reply any
			switch f["type"] {
			case "hello":
				u.hellos++
				reply = map[string]any{"type": "hello_ack", "presenceId": "presence-" + ulid.Make().String(), "memberDisplayName": f["displayName"]}
			case "feature_negotiation_request":
				u.negotiations++ // the upstream broker does not know it: no answer
			case "send":
				u.sends = append(u.sends, f)
				reply = map[string]any{"type": "ack", "id": f["id"], "messageId": "upstream-" + str(f, "id"), "queued": true}
			}
			u.mu.Unlock()
			if reply != nil {
				if err := ws.WriteJSON(reply); err != nil {
					return
				}
			}
		}
	})
	u.srv = httptest.NewServer(mux)
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstreamStandIn) counts() (hellos, negotiations, sends int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.hellos, u.negotiations, len(u.sends)
}

// TestE2EStrictVersusLegacy: a broker that ignores the feature negotiation
// stops a strict daemon (exit non-zero naming --legacy-broker); with
// --legacy-broker the daemon delivers to it and records its messageId.
func TestE2EStrictVersusLegacy(t *testing.T) {
	t.Parallel()
	u := newUpstreamStandIn(t)
	e := newEnv(t)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]any{"meshes": []map[string]string{{"meshId": ulid.Make().String(), "memberId": ulid.Make().String(),
		"slug": "upstream", "name": "carol", "pubkey": hex.EncodeToString(pub), "secretKey": hex.EncodeToString(priv),
		"brokerUrl": "ws" + strings.TrimPrefix(u.srv.URL, "http") + "/ws"}}}
	b, _ := json.Marshal(doc)
	if err := os.WriteFile(filepath.Join(e.configDir, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}

	// Strict (no flag): the negotiation goes unanswered → fatal.
	strict := spawnDaemon(t, e, "--no-tcp")
	strict.waitExit(e2eRecoveryDeadline)
	if code := strict.exitCode(); code != 5 {
		t.Fatalf("strict daemon exited %d against a broker that ignores the negotiation, want 5; stderr:\n%s", code, strict.stderr)
	}
	if !strings.Contains(strict.stderr.String(), "--legacy-broker") {
		t.Fatalf("strict daemon's stderr does not name --legacy-broker:\n%s", strict.stderr)
	}
	hellos, negotiations, sends := u.counts()
	if hellos < 1 || negotiations < 1 || sends != 0 {
		t.Fatalf("stand-in saw %d hellos, %d negotiation requests, %d sends; want ≥1, ≥1, 0", hellos, negotiations, sends)
	}
	t.Logf("strict daemon exited %d after %s", strict.exitCode(), time.Since(strict.started).Round(time.Millisecond))

	// Legacy: starts, sends, records the upstream messageId.
	legacy := &e2ePeer{name: "carol", env: e, pubkey: hex.EncodeToString(pub)}
	legacy.start(t, "--legacy-broker")
	legacy.d.waitLog("legacy_broker", 1) // the loud warning, once connected
	peer, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if st, body, err := trySend(legacy.c, hex.EncodeToString(peer), "to the upstream broker", "legacy-1"); err != nil || st != http.StatusAccepted {
		t.Fatalf("send legacy-1: status %d, %v: %s", st, err, body)
	}
	var row outboxItem
	waitFor(t, e2eDeliverDeadline, "the legacy-1 row to be done", func() bool {
		r, ok := byClientID(listAll(t, legacy.c, messages.StatusDone))["legacy-1"]
		row = r
		return ok
	})
	if row.BrokerMessageID == nil || *row.BrokerMessageID != "upstream-legacy-1" {
		t.Fatalf("legacy-1 row %+v, want broker_message_id upstream-legacy-1", row)
	}
	_, negotiationsAfter, sends := u.counts()
	if negotiationsAfter != negotiations || sends != 1 {
		t.Fatalf("legacy daemon: stand-in saw %d more negotiation requests and %d sends; want 0 and 1", negotiationsAfter-negotiations, sends)
	}
	u.mu.Lock()
	f := u.sends[0]
	u.mu.Unlock()
	if f["id"] != "legacy-1" || f["targetSpec"] != hex.EncodeToString(peer) || strings.Contains(str(f, "ciphertext"), "upstream broker") {
		t.Fatalf("send frame at the stand-in: %v", f)
	}
}

// TestE2EConnectionEvents: a broker restart shows on the daemon's event
// stream as daemon_disconnect, then broker_status and daemon_reconnect.
func TestE2EConnectionEvents(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	m.alice.start(t)
	m.alice.waitConnected(t)
	stream := openSSE(t, m.alice.env.socket(), "")
	m.killBroker()
	m.restartBroker()
	for _, name := range []string{"daemon_disconnect", "broker_status", "daemon_reconnect"} {
		stream.next(name, e2eRecoveryDeadline)
	}
}
