package daemon_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/actors/daemon"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// startEmbedded starts a daemon in-process on paths whose `local` mesh is
// served by the embedded broker (config.json is created on the first start).
func startEmbedded(t *testing.T, paths config.Paths) *daemon.Daemon {
	t.Helper()
	cfg := config.DefaultFile()
	cfg.IPC.TCPEnabled = false
	d, err := daemon.Start(daemon.Options{Paths: paths, Config: cfg, Version: "test", ReapInterval: 20 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func tempPaths(t *testing.T) config.Paths {
	dir, err := os.MkdirTemp("", "sess")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return config.Paths{DaemonDir: filepath.Join(dir, "d"), ConfigDir: filepath.Join(dir, "c")}
}

func newToken(t *testing.T) string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// settleWithin bounds a wait for what the daemon does on its own clock (a
// broker round trip, the reaper) and does not announce.
const settleWithin = 10 * time.Second

func register(t *testing.T, c *ipc.Client, id, name string, pid int) (string, *messages.SessionRegistered) {
	t.Helper()
	tok := newToken(t)
	res, err := c.RegisterSession(context.Background(), &messages.RegisterSession{Token: tok, SessionID: id, Mesh: "local",
		DisplayName: name, PID: pid, Cwd: "/tmp"})
	if err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
	return tok, res
}

// TestSessionsRegistry: register, replace, me, list, deregister; bad input
// is refused and stores nothing; no answer carries a secret.
func TestSessionsRegistry(t *testing.T) {
	paths := tempPaths(t)
	d := startEmbedded(t, paths)
	defer d.Close()
	c := ipc.NewClient(paths.Socket())
	ctx := context.Background()

	for name, req := range map[string]*messages.RegisterSession{
		"short token": {Token: "abc", SessionID: "s", Mesh: "local", DisplayName: "a", PID: os.Getpid()},
		"bad id":      {Token: newToken(t), SessionID: "../x", Mesh: "local", DisplayName: "a", PID: os.Getpid()},
		"no name":     {Token: newToken(t), SessionID: "s", Mesh: "local", PID: os.Getpid()},
		"control":     {Token: newToken(t), SessionID: "s", Mesh: "local", DisplayName: "a\x1b[2J", PID: os.Getpid()},
		"no pid":      {Token: newToken(t), SessionID: "s", Mesh: "local", DisplayName: "a"},
		"dead pid":    {Token: newToken(t), SessionID: "s", Mesh: "local", DisplayName: "a", PID: 1 << 30},
		"bad mesh":    {Token: newToken(t), SessionID: "s", Mesh: "nope", DisplayName: "a", PID: os.Getpid()},
		"bad key": {Token: newToken(t), SessionID: "s", Mesh: "local", DisplayName: "a", PID: os.Getpid(),
			Presence: &messages.RegisterPresence{SessionPubkey: hex.EncodeToString(make([]byte, 32)), SessionSecretKey: hex.EncodeToString(make([]byte, 64))}},
	} {
		var me *messages.Error
		if _, err := c.RegisterSession(ctx, req); !errors.As(err, &me) || me.Status/100 != 4 {
			t.Errorf("%s: %v, want a 4xx", name, err)
		}
	}
	if _, err := os.Stat(paths.SessionsFile()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refused registrations wrote sessions.json: %v", err)
	}

	tokA, a := register(t, c, "sess-a", "alpha", os.Getpid())
	_, b := register(t, c, "sess-b", "beta", os.Getpid())
	if a.SessionPubkey == b.SessionPubkey || len(a.SessionPubkey) != 64 {
		t.Fatalf("keys: %s %s", a.SessionPubkey, b.SessionPubkey)
	}
	me, err := c.AsSession(tokA).SessionMe(ctx)
	if err != nil || me.SessionID != "sess-a" || me.Presence.SessionPubkey != a.SessionPubkey || me.TokenPrefix != tokA[:8] {
		t.Fatalf("me: %+v %v", me, err)
	}
	// The same session id again: the same key, the old token retired.
	tokA2, a2 := register(t, c, "sess-a", "alpha", os.Getpid())
	if a2.SessionPubkey != a.SessionPubkey {
		t.Fatal("re-registering a session id changed its key")
	}
	var unknown *messages.Error
	if _, err := c.AsSession(tokA).SessionMe(ctx); !errors.As(err, &unknown) || unknown.Status != 401 {
		t.Fatalf("the replaced token: %v, want 401", err)
	}
	list, err := c.Sessions(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("sessions: %+v %v", list, err)
	}
	key, err := os.ReadFile(paths.SessionKeyFile("local", "sess-a"))
	if err != nil {
		t.Fatal(err)
	}
	var kept struct{ SessionSecretKey string }
	if err := json.Unmarshal(key, &kept); err != nil || len(kept.SessionSecretKey) != 128 {
		t.Fatalf("key file: %s %v", key, err)
	}
	hc := unixClient(paths.Socket(), 1)
	for _, path := range []string{"/v1/sessions", "/v1/sessions/me"} {
		req, _ := http.NewRequest(http.MethodGet, "http://localhost"+path, nil)
		req.Header.Set("Authorization", messages.SessionHeader+" "+tokA2)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || bytes.Contains(body, []byte(kept.SessionSecretKey[:64])) ||
			bytes.Contains(body, []byte(tokA2)) {
			t.Fatalf("%s answers %d with a secret or the token: %s", path, resp.StatusCode, body)
		}
	}
	for _, fi := range []string{paths.SessionsFile(), paths.SessionKeyFile("local", "sess-a")} {
		if st, _ := os.Stat(fi); st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", fi, st.Mode().Perm())
		}
	}
	for _, c := range []struct {
		method, path, auth string
		status             int
		code               string
	}{
		{http.MethodGet, "/v1/inbox", messages.SessionHeader + " xyz", 401, "invalid_session_token"},
		{http.MethodGet, "/v1/inbox", messages.SessionHeader + " " + strings.Repeat("0", 64), 401, "session_unknown"},
		{http.MethodGet, "/v1/sessions/me", "", 401, "no_session_token"},
		{http.MethodDelete, "/v1/sessions/xyz", "", 400, "invalid_session_token"},
		{http.MethodDelete, "/v1/sessions/" + strings.Repeat("0", 64), "", 404, ""},
		{http.MethodPost, "/v1/sessions/register", "", 400, messages.CodeInvalidJSON},
	} {
		req, _ := http.NewRequest(c.method, "http://localhost"+c.path, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var eb messages.ErrorBody
		json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode != c.status || eb.Error != c.code {
			t.Errorf("%s %s (%q): %d %+v, want %d %s", c.method, c.path, c.auth, resp.StatusCode, eb, c.status, c.code)
		}
	}
	if list, _ := c.Sessions(ctx); len(list) != 2 {
		t.Fatalf("sessions after the refused requests: %+v", list)
	}
	if res, err := c.DeregisterSession(ctx, tokA2); err != nil || !res.OK {
		t.Fatalf("deregister: %+v %v", res, err)
	}
	if _, err := c.DeregisterSession(ctx, tokA2); err == nil {
		t.Fatal("deregistering twice succeeded")
	}
	if list, _ := c.Sessions(ctx); len(list) != 1 || list[0].SessionID != "sess-b" {
		t.Fatalf("after deregister: %+v", list)
	}
}

// TestSessionsSurviveRestart: a session comes back after a restart with
// its key and token; one whose pid now names another process does not.
func TestSessionsSurviveRestart(t *testing.T) {
	paths := tempPaths(t)
	d := startEmbedded(t, paths)
	c := ipc.NewClient(paths.Socket())
	ctx := context.Background()
	tok, a := register(t, c, "sess-a", "alpha", os.Getpid())
	_, _ = register(t, c, "sess-reused", "gamma", os.Getpid())
	d.Close()

	// sess-reused's pid now belongs to a process that started later.
	recs, err := paths.LoadSessions()
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if recs[i].SessionID == "sess-reused" {
			recs[i].StartTime++
		}
	}
	if err := paths.SaveSessions(recs); err != nil {
		t.Fatal(err)
	}
	d = startEmbedded(t, paths)
	defer d.Close()
	me, err := c.AsSession(tok).SessionMe(ctx)
	if err != nil || me.Presence.SessionPubkey != a.SessionPubkey {
		t.Fatalf("after restart: %+v %v", me, err)
	}
	if list, _ := c.Sessions(ctx); len(list) != 1 {
		t.Fatalf("sessions after restart: %+v (the reused pid's session must be gone)", list)
	}
}

// TestSessionReaped: a session whose process exits is dropped by the
// reaper.
func TestSessionReaped(t *testing.T) {
	paths := tempPaths(t)
	d := startEmbedded(t, paths)
	defer d.Close()
	c := ipc.NewClient(paths.Socket())
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tok, _ := register(t, c, "sess-child", "child", cmd.Process.Pid)
	if _, err := c.AsSession(tok).SessionMe(context.Background()); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	wait.For(t, settleWithin, "the reaper to drop the session", func() bool {
		list, err := c.Sessions(context.Background())
		return err == nil && len(list) == 0
	})
}

// TestSessionScoping: two sessions on one daemon each see only what was
// sent to them; a DM to a session's key is opened by that session alone;
// a broadcast reaches the other session and the member, not its sender.
func TestSessionScoping(t *testing.T) {
	paths := tempPaths(t)
	d := startEmbedded(t, paths)
	defer d.Close()
	c := ipc.NewClient(paths.Socket())
	ctx := context.Background()
	tokA, _ := register(t, c, "sess-a", "alpha", os.Getpid())
	tokB, b := register(t, c, "sess-b", "beta", os.Getpid())
	ca, cb := c.AsSession(tokA), c.AsSession(tokB)
	waitListed(t, ca, "alpha", "beta")
	if _, err := ca.Send(ctx, &messages.SendRequest{To: b.SessionPubkey, Message: ptr("for beta"), ClientMessageID: "dm-1"}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.Send(ctx, &messages.SendRequest{To: "*", Message: ptr("to all"), ClientMessageID: "bc-1"}, ""); err != nil {
		t.Fatal(err)
	}
	inbox := func(cl *ipc.Client) []messages.InboxItem {
		page, err := cl.Inbox(ctx, url.Values{"mark_seen": {"false"}})
		if err != nil {
			t.Fatal(err)
		}
		return page.Items
	}
	wait.For(t, settleWithin, "beta's DM and alpha's broadcast", func() bool { return len(inbox(cb)) == 1 && len(inbox(ca)) == 1 })
	got := inbox(cb)[0]
	if messages.Deref(got.Body) != "for beta" || got.RecipientKind != "session" || got.RecipientPubkey != b.SessionPubkey {
		t.Fatalf("beta's inbox: %+v", got)
	}
	if it := inbox(ca)[0]; messages.Deref(it.Body) != "to all" {
		t.Fatalf("alpha's inbox: %+v", it)
	}
	// The member (no session) sees the broadcast in its own rows too.
	wait.For(t, settleWithin, "the member's copy of the broadcast", func() bool {
		page, err := c.Inbox(ctx, url.Values{"mesh": {"local"}})
		return err == nil && len(page.Items) == 1 && messages.Deref(page.Items[0].Body) == "to all"
	})
	// unread_only + the default marking of a session's read.
	page, err := cb.Inbox(ctx, url.Values{"unread_only": {"true"}})
	if err != nil || len(page.Items) != 1 || page.MarkedSeen != 1 {
		t.Fatalf("first unread read: %+v %v", page, err)
	}
	if page, err = cb.Inbox(ctx, url.Values{"unread_only": {"true"}}); err != nil || len(page.Items) != 0 {
		t.Fatalf("second unread read: %+v %v", page, err)
	}
}

func ptr(s string) *string { return &s }

// BenchmarkSessionDM: 100 sessions on one daemon and its embedded broker,
// each sending DMs to the next, paced at 1,000 a second (open loop, 64
// clients); latency runs from the send to the message event on the
// daemon's stream. The CPU profile of this benchmark is the daemon's.
//
//	go test -run='^$' -bench=BenchmarkSessionDM -benchtime=10000x ./actors/daemon/
func BenchmarkSessionDM(b *testing.B) {
	paths := tempPathsB(b)
	cfg := config.DefaultFile()
	cfg.IPC.TCPEnabled = false
	d, err := daemon.Start(daemon.Options{Paths: paths, Config: cfg, Version: "bench",
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	c := ipc.NewClient(paths.Socket())
	const n = 100
	clients, keys := make([]*ipc.Client, n), make([]string, n)
	for i := range n {
		tok := make([]byte, 32)
		rand.Read(tok)
		res, err := c.RegisterSession(ctx, &messages.RegisterSession{Token: hex.EncodeToString(tok), SessionID: fmt.Sprint("s", i),
			Mesh: "local", DisplayName: fmt.Sprint("session-", i), PID: os.Getpid()})
		if err != nil {
			b.Fatal(err)
		}
		clients[i], keys[i] = c.AsSession(hex.EncodeToString(tok)), res.SessionPubkey
	}
	wait.For(b, 20*time.Second, "every session listed as a peer", func() bool {
		peers, _ := clients[0].Peers(ctx, "")
		return len(peers) > n
	})
	stream, err := c.Events(ctx, "", 0)
	if err != nil {
		b.Fatal(err)
	}
	defer stream.Close()
	sent := make([]time.Time, b.N)
	lat := make([]time.Duration, 0, b.N)
	arrived := make(chan struct{})
	go func() {
		defer close(arrived)
		var ev struct {
			ClientMessageID string `json:"client_message_id"`
		}
		for len(lat) < b.N {
			e, err := stream.Next()
			if err != nil {
				return
			}
			if e.Name != "message" || json.Unmarshal(e.Data, &ev) != nil {
				continue
			}
			var i int
			if _, err := fmt.Sscanf(ev.ClientMessageID, "dm-%d", &i); err == nil && i < b.N {
				lat = append(lat, time.Since(sent[i]))
			}
		}
	}()
	var next atomic.Int64
	start := time.Now()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range benchClients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				sent[i] = start.Add(time.Duration(i) * time.Millisecond)
				time.Sleep(time.Until(sent[i]))
				msg := "benchmark message"
				if _, err := clients[i%n].Send(ctx, &messages.SendRequest{To: keys[(i+1)%n], Message: &msg,
					ClientMessageID: fmt.Sprint("dm-", i)}, ""); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		b.Fatalf("%d of %d arrived", len(lat), b.N)
	}
	b.StopTimer()
	report(b, lat)
}

func tempPathsB(b *testing.B) config.Paths {
	dir, err := os.MkdirTemp("", "sessb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return config.Paths{DaemonDir: filepath.Join(dir, "d"), ConfigDir: filepath.Join(dir, "c")}
}

// TestSessionStreamShare: one session holding its share of event streams
// does not keep another session from opening one.
func TestSessionStreamShare(t *testing.T) {
	paths := tempPaths(t)
	d := startEmbedded(t, paths)
	defer d.Close()
	c := ipc.NewClient(paths.Socket())
	tokA, _ := register(t, c, "sess-a", "alpha", os.Getpid())
	tokB, _ := register(t, c, "sess-b", "beta", os.Getpid())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range messages.MaxStreamsPerIdentity {
		s, err := c.AsSession(tokA).Events(ctx, "", 0)
		if err != nil {
			t.Fatalf("alpha's stream %d: %v", i+1, err)
		}
		defer s.Close()
	}
	var me *messages.Error
	if _, err := c.AsSession(tokA).Events(ctx, "", 0); !errors.As(err, &me) || me.Code != "too_many_streams" {
		t.Fatalf("alpha's stream beyond its share: %v, want 429 too_many_streams", err)
	}
	s, err := c.AsSession(tokB).Events(ctx, "", 0)
	if err != nil {
		t.Fatalf("beta's first stream while alpha holds its share: %v", err)
	}
	s.Close()
}

// waitListed waits until c's peer list names every one of names (their
// sessions' broker connections are up).
func waitListed(t *testing.T, c *ipc.Client, names ...string) {
	t.Helper()
	wait.For(t, settleWithin, fmt.Sprint(names, " listed as peers"), func() bool {
		peers, err := c.Peers(context.Background(), "")
		n := 0
		for _, p := range peers {
			if slices.Contains(names, p.DisplayName) {
				n++
			}
		}
		return err == nil && n == len(names)
	})
}

// TestHookPresenceAfterReregistration: a hook's handler that registered a
// session finds its token retired when the agent's MCP server registers the
// same id meanwhile (Claude Code starts both at once); it sets the presence
// on the registration that now holds the id instead of failing the row
// (session_unknown, counted as a failed hook).
func TestHookPresenceAfterReregistration(t *testing.T) {
	paths := tempPaths(t)
	d := startEmbedded(t, paths)
	defer d.Close()
	c := ipc.NewClient(paths.Socket())
	register(t, c, "sess-h", "hooked", os.Getpid())
	var tokB string
	if err := d.HookPresenceAcross(context.Background(), "sess-h", func() {
		tokB, _ = register(t, c, "sess-h", "hooked", os.Getpid())
	}); err != nil {
		t.Fatalf("presence after the id was registered again: %v", err)
	}
	if _, err := c.AsSession(tokB).SessionMe(context.Background()); err != nil {
		t.Fatalf("the new registration: %v", err)
	}
}
