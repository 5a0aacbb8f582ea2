package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// agentSession is one session registered with a daemon: its client (which
// calls as it) and its key.
type agentSession struct {
	name   string
	token  string
	c      *ipc.Client
	pubkey string
}

func registerSession(t testing.TB, sock, mesh, id, name string) *agentSession {
	t.Helper()
	b := make([]byte, 32)
	rand.Read(b)
	tok := hex.EncodeToString(b)
	c := ipc.NewClient(sock)
	res, err := c.RegisterSession(context.Background(), &messages.RegisterSession{Token: tok, SessionID: id, Mesh: mesh,
		DisplayName: name, PID: os.Getpid(), Cwd: "/work"})
	if err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
	return &agentSession{name: name, token: tok, c: c.AsSession(tok), pubkey: res.SessionPubkey}
}

// sessionEvents reads a session's event stream in a goroutine, resuming
// with Last-Event-ID whenever the stream ends (a daemon restart), and
// hands on its message events.
type sessionEvents struct {
	msgs   chan messages.InboxItem
	cancel context.CancelFunc
}

func followSession(t *testing.T, s *agentSession) *sessionEvents {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ev := &sessionEvents{msgs: make(chan messages.InboxItem, 64), cancel: cancel}
	stream, err := s.c.Events(ctx, "", 0)
	if err != nil {
		t.Fatalf("%s's events: %v", s.name, err)
	}
	go func() {
		var last int64
		for ctx.Err() == nil {
			for {
				e, err := stream.Next()
				if err != nil {
					break
				}
				last = e.ID
				if e.Name != "message" {
					continue
				}
				var it messages.InboxItem
				if json.Unmarshal(e.Data, &it) == nil {
					ev.msgs <- it
				}
			}
			stream.Close()
			for ctx.Err() == nil { // the daemon is restarting: resume after the last event seen
				if stream, err = s.c.Events(ctx, "", last); err == nil {
					break
				}
				time.Sleep(wait.Interval) // poll interval; the daemon is re-checked
			}
		}
	}()
	t.Cleanup(cancel)
	return ev
}

// expect reads the session's next messages until it has the bodies want
// (in any order) and fails on any other, or on one seen twice.
func (ev *sessionEvents) expect(t *testing.T, who string, want ...string) {
	t.Helper()
	var got []string
	timer := time.NewTimer(e2eDeliverDeadline)
	defer timer.Stop()
	for len(got) < len(want) {
		select {
		case it := <-ev.msgs:
			body := messages.Deref(it.Body)
			if !slices.Contains(want, body) || slices.Contains(got, body) {
				t.Fatalf("%s got %q (want %q, had %q)", who, body, want, got)
			}
			got = append(got, body)
		case <-timer.C:
			t.Fatalf("%s got %q within %s, want %q", who, got, e2eDeliverDeadline, want)
		}
	}
}

// quiet checks that nothing more reached the session: a marker DM sent to
// it after everything else is the next message it gets.
func (ev *sessionEvents) quiet(t *testing.T, who string, from *agentSession, to *agentSession) {
	t.Helper()
	marker := "marker for " + who
	send(t, from, to.pubkey, marker)
	ev.expect(t, who, marker)
}

func send(t *testing.T, from *agentSession, to, body string) {
	t.Helper()
	res, err := from.c.Send(context.Background(), &messages.SendRequest{To: to, Message: &body}, "")
	if err != nil || res.Accepted == nil {
		t.Fatalf("%s sends %q: %+v %v", from.name, body, res, err)
	}
}

// TestSessionsAcrossDaemons: two sessions on alice's daemon and one on
// bob's, through a real broker. Each session sees only what was sent to
// it, once; a DM to a session's key is opened by that session alone; a
// broadcast reaches every session but its sender; after alice's daemon
// restarts, her session comes back with its key and its event stream
// resumes with Last-Event-ID — a DM sent while her daemon was down arrives
// exactly once.
func TestSessionsAcrossDaemons(t *testing.T) {
	m := newE2EMesh(t)
	m.alice.start(t)
	m.bob.start(t)
	ant := registerSession(t, m.alice.env.socket(), "demo", "sess-ant", "ant")
	bee := registerSession(t, m.alice.env.socket(), "demo", "sess-bee", "bee")
	cat := registerSession(t, m.bob.env.socket(), "demo", "sess-cat", "cat")
	wait.For(t, e2eConnectDeadline, "ant, bee and cat listed as peers", func() bool {
		peers, err := ant.c.Peers(context.Background(), "")
		var names []string
		for _, p := range peers {
			names = append(names, p.DisplayName)
		}
		return err == nil && slices.Contains(names, "ant") && slices.Contains(names, "bee") && slices.Contains(names, "cat")
	})
	antEv, beeEv, catEv := followSession(t, ant), followSession(t, bee), followSession(t, cat)

	send(t, ant, cat.pubkey, "ant to cat")
	send(t, cat, bee.pubkey, "cat to bee")
	send(t, cat, "*", "cat to all")
	catEv.expect(t, "cat", "ant to cat")
	beeEv.expect(t, "bee", "cat to bee", "cat to all")
	antEv.expect(t, "ant", "cat to all")
	catEv.quiet(t, "cat", bee, cat) // cat did not get its own broadcast
	beeEv.quiet(t, "bee", cat, bee)
	antEv.quiet(t, "ant", cat, ant)

	// The inbox agrees, per session, and reads mark.
	page, err := bee.c.Inbox(context.Background(), url.Values{"unread_only": {"true"}})
	if err != nil || len(page.Items) != 3 || page.MarkedSeen != 3 {
		t.Fatalf("bee's unread inbox: %+v %v", page, err)
	}
	for _, it := range page.Items {
		if it.RecipientKind != "session" || it.RecipientPubkey != bee.pubkey {
			t.Fatalf("bee's row %+v: recipient is not bee's session key", it)
		}
	}

	// Restart alice's daemon; cat writes to ant while it is down.
	m.alice.d.stop()
	send(t, cat, ant.pubkey, "while you were away")
	m.alice.start(t)
	me, err := ant.c.SessionMe(context.Background())
	if err != nil || me.Presence.SessionPubkey != ant.pubkey {
		t.Fatalf("ant after the restart: %+v %v", me, err)
	}
	antEv.expect(t, "ant", "while you were away")
	antEv.quiet(t, "ant", cat, ant)
}

// TestSessionCLI: `claudemesh send`, `peers` and `inbox` run inside a
// session (CLAUDEMESH_IPC_TOKEN_FILE) act as it; `claudemesh sessions`
// lists it.
func TestSessionCLI(t *testing.T) {
	e := newEnv(t)
	if err := os.Remove(e.configDir + "/config.json"); err != nil { // the embedded broker's local mesh, made at start
		t.Fatal(err)
	}
	d := startDaemon(t, e, "--no-tcp")
	defer d.stop()
	ant := registerSession(t, e.socket(), "local", "sess-ant", "ant")
	bee := registerSession(t, e.socket(), "local", "sess-bee", "bee")
	wait.For(t, e2eConnectDeadline, "bee listed", func() bool {
		peers, err := ant.c.Peers(context.Background(), "")
		return err == nil && slices.ContainsFunc(peers, func(p ipc.MeshPeer) bool { return p.DisplayName == "bee" })
	})
	tokFile := e.configDir + "/ant-token"
	if err := os.WriteFile(tokFile, []byte(ant.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inAnt := withEnv(e, "CLAUDEMESH_IPC_TOKEN_FILE="+tokFile)
	if r := runCLI(t, inAnt, "send", "bee", "hello from ant's shell"); r.code != 0 {
		t.Fatalf("send inside ant: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wait.For(t, e2eDeliverDeadline, "bee's message", func() bool {
		page, err := bee.c.Inbox(context.Background(), url.Values{"mark_seen": {"false"}})
		return err == nil && len(page.Items) == 1 && page.Items[0].SenderPubkey == ant.pubkey
	})
	r := runCLI(t, inAnt, "inbox", "--json")
	if r.code != 0 || strings.Contains(r.stdout, "hello from ant") {
		t.Fatalf("ant's inbox shows bee's message (or failed): exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, e, "sessions")
	if r.code != 0 || !strings.Contains(r.stdout, "ant") || !strings.Contains(r.stdout, "bee") {
		t.Fatalf("sessions: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A shell left with a token no session holds: each command says what
	// to do in the command line's words, naming the variable it read.
	stale := strings.Repeat("ab", 32)
	gone := withEnv(e, "CLAUDEMESH_IPC_TOKEN="+stale)
	for _, args := range [][]string{{"peers"}, {"send", "bee", "hi"}, {"inbox"}, {"contacts", "list"}} {
		r := runCLI(t, gone, args...)
		if r.code != 1 || !strings.Contains(r.stderr, "session_unknown") || !strings.Contains(r.stderr, "unset CLAUDEMESH_IPC_TOKEN ") ||
			strings.Contains(r.stderr, "/v1/") || strings.Contains(r.stderr, "TOKEN_FILE") {
			t.Errorf("%v with an unknown session token: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	staleFile := e.configDir + "/stale-token"
	if err := os.WriteFile(staleFile, []byte(stale+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, withEnv(e, "CLAUDEMESH_IPC_TOKEN_FILE="+staleFile), "send", "bee", "hi"); r.code != 1 ||
		!strings.Contains(r.stderr, "unset CLAUDEMESH_IPC_TOKEN_FILE") || strings.Contains(r.stderr, "/v1/") {
		t.Errorf("send with an unknown session's token file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// withEnv is e with more environment for the processes it runs.
func withEnv(e *env, kv ...string) *env {
	c := *e
	c.extra = append(slices.Clone(e.extra), kv...)
	return &c
}
