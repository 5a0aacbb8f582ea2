package integration

import (
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/join"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// Deadlines of the broker test.
const (
	brokerFrameDeadline = 5 * time.Second
	brokerStopDeadline  = 5 * time.Second
)

// brokerProc is a `claudemesh broker up` child process.
type brokerProc struct {
	t       *testing.T
	cmd     *exec.Cmd
	stderr  *syncBuffer
	done    chan struct{}
	waitErr error
	addr    string // host:port it serves on
}

var brokerListeningRe = regexp.MustCompile(`(?m)^broker listening on (\S+) \(ws://(\S+)/ws\)$`)

// startBrokerProc starts `claudemesh broker up --listen 127.0.0.1:0` with
// args and waits until it prints the address it serves on.
func startBrokerProc(t *testing.T, e *env, args ...string) *brokerProc {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"broker", "up", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = e.environ()
	b := &brokerProc{t: t, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = b.stderr, b.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	go func() {
		b.waitErr = cmd.Wait()
		close(b.done)
	}()
	t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			_ = cmd.Process.Kill()
			<-b.done
		}
	})
	var m []string
	if err := wait.Until(startDeadline, "the broker to print `broker listening on`", func() bool {
		if m = brokerListeningRe.FindStringSubmatch(b.stderr.String()); m != nil {
			return true
		}
		select {
		case <-b.done:
			t.Fatalf("broker exited during start-up (%v); output:\n%s", b.waitErr, b.stderr)
		default:
		}
		return false
	}); err != nil {
		t.Fatalf("%v; output:\n%s", err, b.stderr)
	}
	if m[1] != m[2] {
		t.Fatalf("broker printed listen address %s but WebSocket %s", m[1], m[2])
	}
	b.addr = m[1]
	return b
}

// wsClient is one WebSocket to the broker process.
type wsClient struct {
	t    *testing.T
	name string
	ws   *websocket.Conn
	seen []map[string]any // frames passed over while waiting for another type
}

func dialBroker(t *testing.T, name, wsURL string) *wsClient {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: brokerFrameDeadline}
	ws, resp, err := d.Dial(wsURL, nil)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("%s: dial %s: %v (HTTP %d)", name, wsURL, err, status)
	}
	t.Cleanup(func() { ws.Close() })
	return &wsClient{t: t, name: name, ws: ws}
}

func (c *wsClient) send(v any) {
	c.t.Helper()
	c.ws.SetWriteDeadline(time.Now().Add(brokerFrameDeadline))
	if err := c.ws.WriteJSON(v); err != nil {
		c.t.Fatalf("%s: write %v: %v", c.name, v, err)
	}
}

func (c *wsClient) sendRaw(data []byte) error {
	c.ws.SetWriteDeadline(time.Now().Add(brokerFrameDeadline))
	return c.ws.WriteMessage(websocket.TextMessage, data)
}

// next returns the next frame of type typ; frames of other types are kept
// for later calls. It fails after brokerFrameDeadline.
func (c *wsClient) next(typ string) map[string]any {
	c.t.Helper()
	for i, f := range c.seen {
		if f["type"] == typ {
			c.seen = append(c.seen[:i], c.seen[i+1:]...)
			return f
		}
	}
	c.ws.SetReadDeadline(time.Now().Add(brokerFrameDeadline))
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.t.Fatalf("%s: waiting for %s: %v (passed over %v)", c.name, typ, err, c.seen)
		}
		var f map[string]any
		if err := json.Unmarshal(data, &f); err != nil {
			c.t.Fatalf("%s: frame is not a JSON object: %q", c.name, data)
		}
		if f["type"] == typ {
			return f
		}
		c.seen = append(c.seen, f)
	}
}

// push returns the next message push, passing over presence events.
func (c *wsClient) push() map[string]any {
	c.t.Helper()
	for {
		if p := c.next("push"); p["subtype"] != "system" {
			return p
		}
	}
}

// closeCode reads until the broker closes the connection and returns the
// close code; frames read meanwhile are kept.
func (c *wsClient) closeCode() int {
	c.t.Helper()
	c.ws.SetReadDeadline(time.Now().Add(brokerFrameDeadline))
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code
			}
			c.t.Fatalf("%s: connection ended without a close frame: %v", c.name, err)
		}
		var f map[string]any
		if json.Unmarshal(data, &f) == nil {
			c.seen = append(c.seen, f)
		}
	}
}

// brokerMember is a member as `claudemesh join` recorded it in config.json.
type brokerMember struct {
	config.Membership
	id *meshcrypto.Identity
}

func joinedMember(t *testing.T, e *env, slug string) *brokerMember {
	t.Helper()
	ms, err := config.Paths{ConfigDir: e.configDir}.LoadMemberships()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Slug == slug {
			id, err := meshcrypto.ParseIdentity(m.SecretKey)
			if err != nil || id.PublicKeyHex() != m.Pubkey {
				t.Fatalf("config.json key of %s does not parse or match its pubkey: %v", m.Name, err)
			}
			return &brokerMember{Membership: m, id: id}
		}
	}
	t.Fatalf("%s records no mesh %s: %+v", e.configDir, slug, ms)
	return nil
}

// hello is m's signed hello.
func (m *brokerMember) hello(sessionID string) map[string]any {
	ts := time.Now().UnixMilli()
	return map[string]any{"type": "hello", "meshId": m.MeshID, "memberId": m.MemberID, "pubkey": m.Pubkey,
		"sessionId": sessionID, "timestamp": ts, "signature": meshcrypto.HelloSignature(m.id, m.MeshID, m.MemberID, ts)}
}

// connect dials the broker URL config.json records for m and completes the
// hello.
func (m *brokerMember) connect(t *testing.T, displayName string) *wsClient {
	t.Helper()
	c := dialBroker(t, displayName, m.BrokerURL)
	c.send(m.hello(displayName + "-session"))
	if ack := c.next("hello_ack"); ack["memberDisplayName"] != displayName || str(ack, "presenceId") == "" {
		t.Fatalf("%s: hello_ack %v", displayName, ack)
	}
	return c
}

// sealedDM is a DM from m to the recipient: crypto_box ciphertext and the
// request fingerprint of the plaintext send.
func (m *brokerMember) sealedDM(t *testing.T, to, clientID, body string) (*messages.SendFrame, messages.Fingerprint) {
	t.Helper()
	dest, err := messages.ParseDestination(to)
	if err != nil {
		t.Fatal(err)
	}
	s := &messages.Send{ClientMessageID: clientID, Destination: dest, Priority: "next", Body: []byte(body)}
	nonce, ct, err := m.id.SealDM(to, s.Body)
	if err != nil {
		t.Fatal(err)
	}
	fp := s.Fingerprint()
	return messages.NewSendFrame(s, clientID, fp, nonce, ct), fp
}

// sendDM sends m's sealed DM clientID to the recipient over c and waits
// for the broker's 201.
func (m *brokerMember) sendDM(t *testing.T, c *wsClient, to, clientID, body string) {
	t.Helper()
	f, _ := m.sealedDM(t, to, clientID, body)
	c.send(f)
	if ack := c.next("ack"); ack["code"] != float64(201) {
		t.Fatalf("%s: ack %v", clientID, ack)
	}
}

// deliveredAt reads the delivery row of a message to a recipient from the
// broker's SQLite database: whether it exists, and whether it is marked
// delivered.
func deliveredAt(t *testing.T, db *sql.DB, messageID, recipient string) (exists, delivered bool) {
	t.Helper()
	var at sql.NullInt64
	err := db.QueryRow(`SELECT delivered_at FROM delivery_queue WHERE message_id = ? AND recipient_pubkey = ?`, messageID, recipient).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false
	}
	if err != nil {
		t.Fatalf("read delivery_queue: %v", err)
	}
	return true, at.Valid
}

// TestBrokerProcess runs the real `claudemesh broker up` on SQLite,
// provisions a mesh with the CLI while it serves, joins two members with
// `claudemesh join`, and speaks the wire protocol to it with their keys:
// hello, negotiation, an end-to-end encrypted DM with the dedupe contract,
// bad input, and a clean SIGTERM.
func TestBrokerProcess(t *testing.T) {
	brokerEnv, aliceEnv, bobEnv := newEnv(t), newEnv(t), newEnv(t)
	dir := filepath.Join(brokerEnv.daemonDir, "broker")
	b := startBrokerProc(t, brokerEnv, "--dir", dir)
	base := "http://" + b.addr
	wsURL := "ws://" + b.addr + "/ws"

	// /health
	var health map[string]any
	status, header, err := getJSON(tcpClient(), base+"/health", &health)
	if err != nil || status != http.StatusOK || health["status"] != "ok" || !strings.HasPrefix(header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /health: %d %v %v (Content-Type %q)", status, health, err, header.Get("Content-Type"))
	}

	// Provisioning: a second process on the SQLite database the broker serves.
	r := runCLI(t, brokerEnv, "broker", "mesh", "create", "demo", "--dir", dir)
	created := regexp.MustCompile(`^created mesh demo \(id ([0-9A-Z]{26})\)\n$`).FindStringSubmatch(r.stdout)
	if r.code != 0 || created == nil {
		t.Fatalf("broker mesh create: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	meshID := created[1]
	r = runCLI(t, brokerEnv, "broker", "invite", "demo", "--uses", "2", "--dir", dir, "--broker-url", base)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	inviteURL := lines[len(lines)-1]
	if _, err := join.ParseLink(inviteURL); r.code != 0 || err != nil || !strings.HasPrefix(inviteURL, base+"/join/") {
		t.Fatalf("broker invite: exit %d, %v\nstdout %q\nstderr %s", r.code, err, r.stdout, r.stderr)
	}
	for _, j := range []struct {
		e    *env
		name string
	}{{aliceEnv, "alice"}, {bobEnv, "bob"}} {
		if r := runCLI(t, j.e, "join", inviteURL, "--name", j.name); r.code != 0 || !strings.Contains(r.stdout, "joined mesh demo") {
			t.Fatalf("join --name %s: exit %d\nstdout %q\nstderr %s", j.name, r.code, r.stdout, r.stderr)
		}
	}
	alice, bob := joinedMember(t, aliceEnv, "demo"), joinedMember(t, bobEnv, "demo")
	for _, m := range []*brokerMember{alice, bob} {
		if m.MeshID != meshID || m.BrokerURL != wsURL {
			t.Fatalf("%s recorded mesh %s at %s, want %s at %s", m.Name, m.MeshID, m.BrokerURL, meshID, wsURL)
		}
	}
	if alice.Pubkey == bob.Pubkey || alice.MemberID == bob.MemberID {
		t.Fatalf("alice and bob share a key or member id: %+v %+v", alice.Membership, bob.Membership)
	}

	// The broker's database, read beside it (WAL allows a reader).
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "broker.db")+"?_pragma=busy_timeout(5000)&_pragma=query_only(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	t.Run("hello negotiation DM dedupe", func(t *testing.T) {
		a, bc := alice.connect(t, "alice"), bob.connect(t, "bob")

		a.send(map[string]any{"type": "feature_negotiation_request",
			"require": []string{"client_message_id_dedupe", "concurrent_connection_policy"}})
		resp := a.next("feature_negotiation_response")
		supported, _ := resp["supported"].(map[string]any)
		for _, f := range []string{"client_message_id_dedupe", "concurrent_connection_policy"} {
			if _, ok := supported[f]; !ok {
				t.Errorf("negotiation response does not list %s: %v", f, resp)
			}
		}
		if missing, ok := resp["missing_required"].([]any); !ok || len(missing) != 0 {
			t.Errorf("missing_required %v, want []", resp["missing_required"])
		}

		const plaintext = "hello bob: end to end, through a real broker process"
		frame, fp := alice.sealedDM(t, bob.Pubkey, "it-dm-1", plaintext)
		if strings.Contains(frame.Ciphertext, "hello bob") {
			t.Fatal("the DM went out in clear")
		}
		a.send(frame)
		ack := a.next("ack")
		brokerID := str(ack, "broker_message_id")
		if ack["code"] != float64(201) || ack["queued"] != true || brokerID == "" || ack["messageId"] != brokerID ||
			ack["id"] != "it-dm-1" || ack["client_message_id"] != "it-dm-1" {
			t.Fatalf("first ack %v, want 201 queued with a broker_message_id", ack)
		}

		p := bc.push()
		if p["messageId"] != brokerID || p["meshId"] != meshID || p["senderPubkey"] != alice.Pubkey || p["targetSpec"] != bob.Pubkey ||
			p["client_message_id"] != "it-dm-1" || p["request_fingerprint"] != fp.Hex() || p["senderName"] != "alice" {
			t.Fatalf("bob's push %v", p)
		}
		got, err := bob.id.OpenDM(str(p, "senderPubkey"), str(p, "nonce"), str(p, "ciphertext"))
		if err != nil || string(got) != plaintext {
			t.Fatalf("bob opens %q, %v; want %q", got, err, plaintext)
		}
		if exists, delivered := deliveredAt(t, db, brokerID, bob.Pubkey); !exists || delivered {
			t.Fatalf("bob's delivery row before client_ack: exists %v, delivered %v; want pending", exists, delivered)
		}
		bc.send(map[string]any{"type": "client_ack", "clientMessageId": "it-dm-1", "brokerMessageId": brokerID})
		wait.For(t, brokerFrameDeadline, "the client_ack to mark bob's delivery delivered", func() bool {
			_, delivered := deliveredAt(t, db, brokerID, bob.Pubkey)
			return delivered
		})

		// A retry of the same frame: 200 duplicate, the same message.
		a.send(frame)
		dup := a.next("ack")
		if dup["code"] != float64(200) || dup["duplicate"] != true || dup["broker_message_id"] != brokerID {
			t.Fatalf("retry ack %v, want 200 duplicate of %s", dup, brokerID)
		}
		// The same id with other content: 409 naming the stored fingerprint.
		other, _ := alice.sealedDM(t, bob.Pubkey, "it-dm-1", plaintext+" (edited)")
		a.send(other)
		conflict := a.next("ack")
		if conflict["code"] != float64(409) || conflict["error"] != messages.CodeIdempotencyReused ||
			conflict["broker_fingerprint_prefix"] != fp.Prefix() {
			t.Fatalf("conflict ack %v, want 409 %s with prefix %s", conflict, messages.CodeIdempotencyReused, fp.Prefix())
		}
		// Neither the retry nor the conflict reached bob: his next push is
		// the marker.
		alice.sendDM(t, a, bob.Pubkey, "it-dm-2", "marker")
		if p := bc.push(); p["client_message_id"] != "it-dm-2" {
			t.Fatalf("bob got %v after the retry and the conflict, want the marker it-dm-2", p)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		// Errors before the hello leave the connection open: the hello then
		// succeeds on it.
		c := dialBroker(t, "early", wsURL)
		c.send(map[string]any{"type": "list_peers"})
		if f := c.next("error"); f["code"] != "no_hello" {
			t.Errorf("a frame before hello: %v, want no_hello", f)
		}
		for raw, code := range map[string]string{`{"type":`: "invalid_frame", `not json`: "invalid_frame", `{"type":"graph_query"}`: "unknown_message_type"} {
			if err := c.sendRaw([]byte(raw)); err != nil {
				t.Fatal(err)
			}
			if f := c.next("error"); f["code"] != code {
				t.Errorf("%s: %v, want %s", raw, f, code)
			}
		}
		c.send(alice.hello("early"))
		if ack := c.next("hello_ack"); ack["memberDisplayName"] != "alice" {
			t.Errorf("hello after the errors: %v", ack)
		}

		// A frame over 256 KiB closes the connection with 1009.
		big := dialBroker(t, "big", wsURL)
		payload := `{"type":"send","ciphertext":"` + strings.Repeat("A", 256<<10) + `"}`
		_ = big.sendRaw([]byte(payload)) // the broker may close before reading it all
		if code := big.closeCode(); code != websocket.CloseMessageTooBig {
			t.Errorf("oversize frame: close %d, want 1009", code)
		}

		// A hello signed over other content: bad_signature, then 1008.
		forged := dialBroker(t, "forged", wsURL)
		h := alice.hello("forged")
		h["signature"] = meshcrypto.HelloSignature(alice.id, alice.MeshID, bob.MemberID, h["timestamp"].(int64))
		forged.send(h)
		if f := forged.next("error"); f["code"] != "bad_signature" {
			t.Errorf("forged hello: %v, want bad_signature", f)
		}
		if code := forged.closeCode(); code != websocket.ClosePolicyViolation {
			t.Errorf("forged hello: close %d, want 1008", code)
		}

		// The endpoint is exactly /ws: a query string is refused before the
		// upgrade.
		d := websocket.Dialer{HandshakeTimeout: brokerFrameDeadline}
		ws, resp, err := d.Dial(wsURL+"?x=1", nil)
		if err == nil {
			ws.Close()
			t.Fatal("/ws?x=1 upgraded")
		}
		if !errors.Is(err, websocket.ErrBadHandshake) || resp == nil || resp.StatusCode != http.StatusBadRequest {
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			t.Errorf("/ws?x=1: %v, HTTP %d; want 400", err, status)
		}
	})

	// SIGTERM, with members still connected: exit 0 within 5 s.
	live := alice.connect(t, "alice")
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.done:
	case <-time.After(brokerStopDeadline):
		t.Fatalf("broker still running %s after SIGTERM; output:\n%s", brokerStopDeadline, b.stderr)
	}
	if code := b.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("broker exited %d after SIGTERM, want 0; output:\n%s", code, b.stderr)
	}
	if !strings.Contains(b.stderr.String(), `"msg":"broker_shutdown"`) {
		t.Errorf("no broker_shutdown log:\n%s", b.stderr)
	}
	live.ws.SetReadDeadline(time.Now().Add(brokerFrameDeadline))
	for {
		if _, _, err := live.ws.ReadMessage(); err != nil {
			if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
				t.Errorf("a connected client saw the broker stop as %v, want close 1001 (going away)", err)
			}
			break
		}
	}
}
