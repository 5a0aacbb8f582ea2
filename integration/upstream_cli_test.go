package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/messages"
)

// upstreamFeatures are the ipc_features of the upstream daemon 1.37.0
// (upstream-daemon-notes §3.2): no outbox among them.
var upstreamFeatures = []string{"version", "health", "send", "inbox", "events", "peers", "profile", "skills", "state", "memory", "sessions"}

// upstreamDaemon stands in for the upstream TypeScript daemon on a test's
// socket: the routes the CLI uses, answered in upstream's shapes (its
// /v1/version has no pid and no meshes, its inbox is newest first without
// a cursor, its outbox — served whether or not its features list it, as
// upstream's is — lists the sends it took, done, newest first, then an
// older row, with times as ISO strings or null). It records what the CLI
// sent.
type upstreamDaemon struct {
	features []string
	bob      string // the one peer's pubkey
	noOutbox bool   // GET /v1/outbox is not served (404), as by an older upstream daemon

	mu    sync.Mutex
	sends []map[string]any
	taken []string // the client_message_ids of the sends, as answered
	asked []string // request paths with their queries
}

func startUpstreamDaemon(t *testing.T, e *env, features []string) *upstreamDaemon {
	t.Helper()
	return serveUpstreamDaemon(t, e, &upstreamDaemon{features: features, bob: strings.Repeat("b0", 32)})
}

func serveUpstreamDaemon(t *testing.T, e *env, u *upstreamDaemon) *upstreamDaemon {
	t.Helper()
	l, err := net.Listen("unix", e.socket())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: u}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return u
}

func (u *upstreamDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.asked = append(u.asked, r.Method+" "+r.URL.RequestURI())
	u.mu.Unlock()
	reply := func(status int, body string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
	switch r.Method + " " + r.URL.Path {
	case "GET /v1/version":
		f, _ := json.Marshal(u.features)
		reply(200, `{"daemon_version":"1.37.0","ipc_api":"v1","ipc_features":`+string(f)+`,"schema_version":1}`)
	case "GET /v1/health":
		reply(200, `{"ok":true,"pid":58837,"brokers":{"flexicar":"open"}}`)
	case "GET /v1/sessions":
		reply(200, `{"sessions":[{"sessionId":"s-1","mesh":"flexicar","displayName":"bob-cli","pid":4242,"registeredAt":1781431200000,"token_prefix":"0a1b2c3d"}]}`)
	case "GET /v1/peers":
		reply(200, `{"peers":[{"pubkey":"`+u.bob+`","memberPubkey":"`+u.bob+`","displayName":"bob","status":"idle",`+
			`"summary":"","groups":[],"sessionId":"s-1","connectedAt":"2026-06-14T10:00:00.000Z","cwd":"/w","peerRole":"member","mesh":"flexicar"}]}`)
	case "POST /v1/send":
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			reply(500, `{"error":"internal"}`)
			return
		}
		reply(202, `{"client_message_id":"`+u.take(body)+`","status":"queued"}`)
	case "GET /v1/inbox":
		reply(200, `{"items":[`+
			`{"id":"i-2","client_message_id":"c-2","broker_message_id":null,"mesh":"flexicar","topic":null,"sender_pubkey":"`+u.bob+`",`+
			`"sender_name":"bob","body":"second","received_at":"2026-06-14T10:00:02.000Z","reply_to_id":"bm-1","seen_at":null,"recipient_pubkey":null,"recipient_kind":null},`+
			`{"id":"i-1","client_message_id":"c-1","broker_message_id":"bm-1","mesh":"flexicar","topic":null,"sender_pubkey":"`+u.bob+`",`+
			`"sender_name":"bob","body":"first","received_at":"2026-06-14T10:00:01.000Z","reply_to_id":null,"seen_at":null,"recipient_pubkey":null,"recipient_kind":null}`+
			`],"marked_seen":0}`)
	case "GET /v1/outbox":
		if u.noOutbox {
			reply(404, `{"error":"not found"}`)
			return
		}
		reply(200, `{"items":[`+u.sentRows()+`{"id":"row-1","client_message_id":"c-9","status":"done","attempts":1,"enqueued_at":"2026-06-14T10:00:00.000Z",`+
			`"next_attempt_at":"2026-06-14T10:00:00.000Z","delivered_at":"2026-06-14T10:00:00.100Z","broker_message_id":"bm-9","last_error":null,`+
			`"aborted_at":null,"aborted_by":null,"superseded_by":null,"payload_bytes":5}]}`)
	default:
		reply(404, `{"error":"not found"}`)
	}
}

// take records a send's body and returns its client_message_id: the
// body's, else a new one.
func (u *upstreamDaemon) take(body map[string]any) string {
	cid, _ := body["client_message_id"].(string)
	if cid == "" {
		cid = ulid.Make().String()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.sends, u.taken = append(u.sends, body), append(u.taken, cid)
	return cid
}

// sentRows are the outbox rows of the sends taken, newest first, each
// followed by a comma: done, the broker's id "bm-<n>" for the n-th send.
func (u *upstreamDaemon) sentRows() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var b strings.Builder
	for i := len(u.taken) - 1; i >= 0; i-- {
		cid := u.taken[i]
		fmt.Fprintf(&b, `{"id":"sent-%d","client_message_id":%q,"status":"done","attempts":1,"enqueued_at":"2026-06-14T11:00:00.000Z",`+
			`"next_attempt_at":"2026-06-14T11:00:00.000Z","delivered_at":"2026-06-14T11:00:00.100Z","broker_message_id":"bm-%d",`+
			`"last_error":null,"aborted_at":null,"aborted_by":null,"superseded_by":null,"payload_bytes":5},`, i+1, cid, i+1)
	}
	return b.String()
}

func (u *upstreamDaemon) recorded() (sends []map[string]any, asked []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]map[string]any(nil), u.sends...), append([]string(nil), u.asked...)
}

// daemonNamed decodes the "daemon" member of one JSON object of --json
// output.
func daemonNamed(t *testing.T, line string) (kind, version string) {
	t.Helper()
	var v struct {
		Daemon struct {
			Kind    string `json:"kind"`
			Version string `json:"version"`
		} `json:"daemon"`
	}
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		t.Fatalf("not a JSON object: %v: %q", err, line)
	}
	return v.Daemon.Kind, v.Daemon.Version
}

// TestCLIAgainstUpstreamDaemon: send, peers, inbox, outbox and bench,
// through the real binary, against a daemon that answers in upstream's
// shapes: each detects it, uses what its ipc_features offer and what it
// serves without listing it (its outbox, whose route is asked once per
// command), and says in --json which daemon answered.
func TestCLIAgainstUpstreamDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := startUpstreamDaemon(t, e, upstreamFeatures)

	r := runCLI(t, e, "send", "--json", "--client-message-id", "key-A", "Bob", "hello upstream")
	if r.code != 0 {
		t.Fatalf("send: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if kind, version := daemonNamed(t, r.stdout); kind != "upstream" || version != "1.37.0" || !strings.Contains(r.stdout, `"status":"queued"`) {
		t.Fatalf("send --json: %q; want the upstream daemon 1.37.0 named and its answer", r.stdout)
	}
	sends, _ := u.recorded()
	if len(sends) != 1 || sends[0]["to"] != u.bob || sends[0]["mesh"] != "flexicar" || sends[0]["client_message_id"] != "key-A" ||
		sends[0]["message"] != "hello upstream" {
		t.Fatalf("the daemon was sent %v; want bob's key (resolved through its peers), its only mesh, the id and the text", sends)
	}
	r = runCLI(t, e, "send", "--wait", "5s", "--client-message-id", "key-B", u.bob, "and wait")
	if r.code != 0 || !strings.Contains(r.stdout, "delivered key-B") || !strings.Contains(r.stdout, "bm-2") {
		t.Fatalf("send --wait: exit %d\nstdout %q\nstderr %s; want key-B delivered as bm-2, read from the outbox upstream serves unlisted",
			r.code, r.stdout, r.stderr)
	}

	r = runCLI(t, e, "peers", "--json")
	var peers []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &peers); r.code != 0 || err != nil || len(peers) != 1 {
		t.Fatalf("peers --json: exit %d, %v\n%q\n%s", r.code, err, r.stdout, r.stderr)
	}
	if d, _ := peers[0]["daemon"].(map[string]any); d["kind"] != "upstream" || peers[0]["pubkey"] != u.bob || peers[0]["mesh"] != "flexicar" {
		t.Fatalf("peers --json: %v", peers[0])
	}

	r = runCLI(t, e, "inbox", "--json", "--since", "2026-06-14T00:00:00Z")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 {
		t.Fatalf("inbox --json: exit %d\n%q\n%s", r.code, r.stdout, r.stderr)
	}
	var items [2]messages.InboxItem
	for i, line := range lines {
		if kind, _ := daemonNamed(t, line); kind != "upstream" {
			t.Errorf("inbox line %d names daemon %q", i, kind)
		}
		json.Unmarshal([]byte(line), &items[i])
	}
	if items[0].ID != "i-1" || items[1].ID != "i-2" || items[1].ReplyToID != "bm-1" {
		t.Fatalf("inbox: %+v; want upstream's newest-first page oldest first, reply_to_id kept", items)
	}
	r = runCLI(t, e, "inbox", "--since", "2026-06-14T00:00:00Z")
	if want := "2026-06-14T10:00:01.000Z  flexicar  -  bob: first\n"; r.code != 0 || !strings.HasPrefix(r.stdout, want) {
		t.Fatalf("inbox: exit %d, %q; want it to start %q", r.code, r.stdout, want)
	}
	_, asked := u.recorded()
	if !strings.Contains(strings.Join(asked, "\n"), "mark_seen=false") {
		t.Errorf("inbox marked what it showed as seen: %v", asked)
	}

	if r := runCLI(t, e, "daemon", "outbox", "list"); r.code != 0 || !strings.Contains(r.stdout, "key-B") || !strings.Contains(r.stdout, "c-9") {
		t.Fatalf("outbox list: exit %d\nstdout %q\nstderr %s; want upstream's rows", r.code, r.stdout, r.stderr)
	}
	if _, asked := u.recorded(); strings.Count(strings.Join(asked, "\n"), "GET /v1/outbox?limit=1\n") != 2 {
		t.Errorf("asked %v; want GET /v1/outbox?limit=1 once for send --wait and once for outbox list", asked)
	}

	r = runCLI(t, e, "bench", "--mode", "accept", "--count", "40", "--clients", "4", "--to", u.bob, "--json")
	if kind, _ := daemonNamed(t, r.stdout); r.code != 0 || kind != "upstream" || !strings.Contains(r.stdout, `"sent":40`) {
		t.Fatalf("bench: exit %d\n%q\n%s", r.code, r.stdout, r.stderr)
	}
	if sends, _ := u.recorded(); len(sends) != 42 {
		t.Fatalf("the daemon saw %d sends, want 42", len(sends))
	}
}

// TestCLIAgainstUpstreamDaemonWithoutOutbox: a daemon that neither lists
// outbox nor answers its route has send --wait (before anything is sent)
// and outbox list refused, naming the feature, the daemon and the answer.
func TestCLIAgainstUpstreamDaemonWithoutOutbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := serveUpstreamDaemon(t, e, &upstreamDaemon{features: upstreamFeatures, bob: strings.Repeat("b0", 32), noOutbox: true})
	if r := runCLI(t, e, "send", "--wait", "5s", u.bob, "and wait"); r.code != 2 || !strings.Contains(r.stderr, `"outbox"`) ||
		!strings.Contains(r.stderr, "answered 404") {
		t.Fatalf("send --wait: exit %d, stderr %q; want 2 naming the outbox feature and the route's 404", r.code, r.stderr)
	}
	if r := runCLI(t, e, "daemon", "outbox", "list"); r.code != 1 || !strings.Contains(r.stderr, `"outbox" ipc feature`) ||
		!strings.Contains(r.stderr, "upstream daemon 1.37.0") {
		t.Fatalf("outbox list: exit %d, stderr %q; want 1 naming the missing feature and the daemon", r.code, r.stderr)
	}
	if sends, _ := u.recorded(); len(sends) != 0 {
		t.Fatalf("sent %v; want nothing", sends)
	}
}

// TestCLIAgainstUpstreamDaemonWithOutbox: an upstream-shaped daemon that
// does offer outbox is listed in its own row shape, and a requeue that
// would lose --patch-payload is refused before anything is asked.
func TestCLIAgainstUpstreamDaemonWithOutbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	startUpstreamDaemon(t, e, append([]string{"outbox"}, upstreamFeatures...))
	r := runCLI(t, e, "daemon", "outbox", "list", "--json")
	var page struct {
		Daemon struct{ Kind string } `json:"daemon"`
		messages.OutboxPage
	}
	if err := json.Unmarshal([]byte(r.stdout), &page); r.code != 0 || err != nil || page.Daemon.Kind != "upstream" ||
		len(page.Items) != 1 || page.Items[0].ClientMessageID != "c-9" || messages.Deref(page.Items[0].BrokerMessageID) != "bm-9" {
		t.Fatalf("outbox list --json: exit %d, %v\n%q\n%s", r.code, err, r.stdout, r.stderr)
	}
	patch := e.file("patch.json")
	if err := os.WriteFile(patch, []byte(`{"to":"*","message":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, e, "daemon", "outbox", "requeue", "row-1", "--patch-payload", patch); r.code != 2 ||
		!strings.Contains(r.stderr, "--patch-payload") {
		t.Fatalf("requeue --patch-payload: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestDaemonStatusAgainstUpstreamDaemon: daemon status names an upstream
// daemon as daemon version does and shows what its API offers — its ipc
// features, its pid and each mesh's broker from its health, its agent
// sessions — in text and in --json (upstream-daemon-notes §3.2's shapes).
func TestDaemonStatusAgainstUpstreamDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	startUpstreamDaemon(t, e, upstreamFeatures)
	r := runCLI(t, e, "daemon", "status")
	want := []string{
		"daemon: running, upstream 1.37.0 (pid 58837, ipc v1, schema 1)\n",
		"socket: " + e.socket() + "\n",
		"ipc features: " + strings.Join(upstreamFeatures, ", ") + "\n",
		"MESH      BROKER\nflexicar  open\n",
		"agent sessions: 1 registered\n",
	}
	if r.code != 0 || r.stdout != strings.Join(want, "") {
		t.Fatalf("daemon status: exit %d\nstdout:\n%s\nwant:\n%s\nstderr %s", r.code, r.stdout, strings.Join(want, ""), r.stderr)
	}
	r = runCLI(t, e, "daemon", "status", "--json")
	var got struct {
		Running       bool           `json:"running"`
		Daemon        map[string]any `json:"daemon"`
		IPCAPI        string         `json:"ipc_api"`
		SchemaVersion int            `json:"schema_version"`
		IPCFeatures   []string       `json:"ipc_features"`
		Health        map[string]any `json:"health"`
		LiveSessions  int            `json:"live_sessions"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); r.code != 0 || err != nil || !got.Running || got.Daemon["kind"] != "upstream" ||
		got.Daemon["version"] != "1.37.0" || got.IPCAPI != "v1" || got.SchemaVersion != 1 || len(got.IPCFeatures) != len(upstreamFeatures) ||
		got.Health["pid"] != float64(58837) || fmt.Sprint(got.Health["brokers"]) != "map[flexicar:open]" || got.LiveSessions != 1 {
		t.Fatalf("daemon status --json: exit %d, %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
}
