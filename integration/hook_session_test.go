package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// An agent session's life through its hooks: SessionEnd, Claude Code's
// /clear, and the context a SessionStart gives the agent. The receiver is
// the built claudemesh-hook, fed the JSON Claude Code sends (the samples
// of messages/hookevent/testdata).

// hookInputWith is hookInput with fields of the JSON changed (a /clear's
// source or reason, the working directory).
func hookInputWith(t *testing.T, event, session string, fields map[string]any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(hookInput(t, event, session), &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range fields {
		m[k] = v
	}
	out, _ := json.Marshal(m)
	return out
}

// peerStatus is the status of the peer with pubkey on e's daemon's mesh,
// "" when it is not listed (offline).
func peerStatus(t *testing.T, e *env, pubkey string) string {
	t.Helper()
	var body struct {
		Peers []struct {
			Pubkey string `json:"pubkey"`
			Status string `json:"status"`
		} `json:"peers"`
	}
	if st, _, err := getJSON(unixClient(e.socket()), "http://localhost/v1/peers", &body); err != nil || st != http.StatusOK {
		t.Fatalf("GET /v1/peers: %d %v", st, err)
	}
	for _, p := range body.Peers {
		if p.Pubkey == pubkey {
			return p.Status
		}
	}
	return ""
}

// registeredSessions is GET /v1/sessions.
func registeredSessions(t *testing.T, e *env) []messages.SessionInfo {
	t.Helper()
	list, err := ipc.NewClient(e.socket()).Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// sessionPubkey waits for the hooks to register session id and returns
// its key once its peer is online.
func sessionPubkey(t *testing.T, e *env, id string) string {
	t.Helper()
	var pubkey string
	wait.For(t, 20*time.Second, "session "+id+" registered and online", func() bool {
		for _, s := range registeredSessions(t, e) {
			if s.SessionID == id {
				pubkey = s.Presence.SessionPubkey
			}
		}
		return pubkey != "" && peerStatus(t, e, pubkey) != ""
	})
	return pubkey
}

// TestHookSessionEnd: a SessionEnd takes the session's peer offline within
// a second and drops its registration, where the reaper would have waited
// for the process to end.
func TestHookSessionEnd(t *testing.T) {
	t.Parallel()
	e := hookEnv(t)
	startDaemon(t, e, "--no-tcp")
	const id = "5e55e0d0-0000-4c6e-8f7a-000000000001"
	runHook(t, e, hookBinPath, "SessionStart", hookInput(t, "SessionStart", id))
	pubkey := sessionPubkey(t, e, id)

	runHook(t, e, hookBinPath, "SessionEnd", hookInput(t, "SessionEnd", id))
	wait.For(t, time.Second, "the ended session's peer offline", func() bool { return peerStatus(t, e, pubkey) == "" })
	if list := registeredSessions(t, e); len(list) != 0 {
		t.Errorf("sessions after SessionEnd: %+v", list)
	}
}

// TestHookClearKeepsOnePeer: Claude Code's /clear ends the conversation's
// session id and starts a new one in the same process (its MCP server
// staying registered under the old one). The new id goes on as the same
// session — one peer, its presence following the new id's hooks, also
// after a daemon restart — and the new id's SessionEnd takes that peer
// offline.
func TestHookClearKeepsOnePeer(t *testing.T) {
	t.Parallel()
	e := hookEnv(t)
	d := startDaemon(t, e, "--no-tcp")
	const before, after = "c1ea4000-0000-4c6e-8f7a-000000000001", "c1ea4000-0000-4c6e-8f7a-000000000002"
	runHook(t, e, hookBinPath, "SessionStart", hookInput(t, "SessionStart", before))
	pubkey := sessionPubkey(t, e, before)

	runHook(t, e, hookBinPath, "SessionEnd", hookInputWith(t, "SessionEnd", before, map[string]any{"reason": "clear"}))
	runHook(t, e, hookBinPath, "SessionStart", hookInputWith(t, "SessionStart", after, map[string]any{"source": "clear"}))
	runHook(t, e, hookBinPath, "UserPromptSubmit", hookInput(t, "UserPromptSubmit", after))
	wait.For(t, 20*time.Second, "the session working after the new id's prompt", func() bool {
		return peerStatus(t, e, pubkey) == messages.AgentWorking
	})
	wait.For(t, 20*time.Second, "every row delivered", func() bool { return undelivered(hookRows(t, e)) == 0 })
	if list := registeredSessions(t, e); len(list) != 1 || list[0].SessionID != before {
		t.Fatalf("sessions after /clear: %+v, want %s alone", list, before)
	}

	d.stop()
	startDaemon(t, e, "--no-tcp")
	wait.For(t, 20*time.Second, "the session back online, idle", func() bool { return peerStatus(t, e, pubkey) == messages.AgentIdle })
	runHook(t, e, hookBinPath, "UserPromptSubmit", hookInput(t, "UserPromptSubmit", after))
	wait.For(t, 20*time.Second, "the session working after the new id's prompt, past a restart", func() bool {
		return peerStatus(t, e, pubkey) == messages.AgentWorking
	})
	if list := registeredSessions(t, e); len(list) != 1 || list[0].SessionID != before {
		t.Fatalf("sessions after the restart: %+v, want %s alone", list, before)
	}

	runHook(t, e, hookBinPath, "SessionEnd", hookInput(t, "SessionEnd", after))
	wait.For(t, time.Second, "the peer offline after the new id's SessionEnd", func() bool { return peerStatus(t, e, pubkey) == "" })
	if list := registeredSessions(t, e); len(list) != 0 {
		t.Errorf("sessions after the last SessionEnd: %+v", list)
	}
}

// otherAgent registers a session of another agent process on e's daemon:
// a sleep the test ends, started through a shell that leaves it, so that
// it is neither the test's process (which the hooks' sessions belong to)
// nor a child of it (as the test's MCP server would be).
func otherAgent(t *testing.T, e *env, id, name string) *agentSession {
	t.Helper()
	out, err := exec.Command("sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!").Output()
	pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid <= 0 {
		t.Fatalf("start another agent: %v %q", err, out)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return registerSessionOf(t, e.socket(), "local", id, name, pid)
}

// startHook runs claudemesh-hook SessionStart with input and returns the
// additionalContext it printed ("" for nothing); it must exit 0 and write
// nothing on stderr.
func startHook(t *testing.T, e *env, input []byte) string {
	t.Helper()
	cmd := exec.Command(hookBinPath, "SessionStart")
	cmd.Env, cmd.Stdin = e.environ(), bytes.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("claudemesh-hook SessionStart: %v, stderr %q", err, stderr.String())
	}
	if stdout.Len() == 0 {
		return ""
	}
	var out struct {
		HookSpecificOutput struct {
			HookEventName     string `json:"hookEventName"`
			AdditionalContext string `json:"additionalContext"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || out.HookSpecificOutput.HookEventName != "SessionStart" {
		t.Fatalf("SessionStart output %q: %v", stdout.String(), err)
	}
	return out.HookSpecificOutput.AdditionalContext
}

// TestHookSessionStartContext: at a SessionStart, claudemesh-hook tells
// Claude Code (hookSpecificOutput.additionalContext) the session's unread
// messages, the reservations and locks it holds, and who else has
// reservations in its repository — asking the daemon, reading nothing as
// seen; a new session that nothing concerns gets nothing, and so does any
// session while the daemon is down.
func TestHookSessionStartContext(t *testing.T) {
	t.Parallel()
	e := hookEnv(t)
	d := startDaemon(t, e, "--no-tcp")
	repoDir := t.TempDir()
	gitRun(t, repoDir, os.Environ(), "init", "-q")
	gitRun(t, repoDir, os.Environ(), "commit", "-q", "--allow-empty", "-m", "root")
	root, _ := gitRun(t, repoDir, os.Environ(), "rev-list", "--max-parents=0", "HEAD")
	repo := "git:" + strings.TrimSpace(root)
	const id = "c0a7e470-0000-4c6e-8f7a-000000000001"
	in := map[string]any{"cwd": repoDir}
	if got := startHook(t, e, hookInputWith(t, "SessionStart", id, in)); got != "" {
		t.Errorf("a new session's context: %q, want none", got)
	}
	pubkey := sessionPubkey(t, e, id)
	tok, err := os.ReadFile(filepath.Join(e.daemonDir, "session-tokens", id))
	if err != nil {
		t.Fatal(err)
	}
	me := ipc.NewClient(e.socket()).AsSession(strings.TrimSpace(string(tok)))
	ctx := context.Background()

	bob := otherAgent(t, e, "c0a7e470-b0b", "bob")
	wait.For(t, 20*time.Second, "bob connected", func() bool { _, err := bob.c.Reservations(ctx, "", ""); return err == nil })
	if got := reserveAs(t, bob.c, messages.ReserveRequest{Repo: repo, Patterns: []string{"docs/**"}}); !got.Granted {
		t.Fatalf("bob's docs/** = %+v", got)
	}
	if got := reserveAs(t, me, messages.ReserveRequest{Repo: repo, Patterns: []string{"src/**"}, Shared: true}); !got.Granted {
		t.Fatalf("the session's src/** = %+v", got)
	}
	if got, err := me.AcquireLock(ctx, &messages.LockAcquireRequest{Key: "deploy", Repo: repo}); err != nil || !got.Granted {
		t.Fatalf("the session's lock: %+v %v", got, err)
	}
	for _, text := range []string{"first", "second"} {
		if _, err := bob.c.Send(ctx, &messages.SendRequest{To: pubkey, Message: &text}, ""); err != nil {
			t.Fatal(err)
		}
	}
	unread := func() int {
		page, err := me.Inbox(ctx, url.Values{"unread_only": {"true"}, "mark_seen": {"false"}})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Items)
	}
	wait.For(t, 20*time.Second, "two messages in the session's inbox", func() bool { return unread() == 2 })

	for _, source := range []string{"resume", "compact"} {
		got := startHook(t, e, hookInputWith(t, "SessionStart", id, map[string]any{"cwd": repoDir, "source": source}))
		for _, want := range []string{"on mesh local", "2 unread messages: call check_messages", "1 file reservation: src/** (shared, until ",
			"1 lock: deploy (until ", "Others' reservations in this repository: bob holds docs/** (exclusive, until "} {
			if !strings.Contains(got, want) {
				t.Errorf("%s: the context lacks %q:\n%s", source, want, got)
			}
		}
	}
	if n := unread(); n != 2 {
		t.Errorf("%d unread after the SessionStarts, want 2: the context reads nothing as seen", n)
	}
	// A /clear's new id: the context of the session the process goes on as.
	const next = "c0a7e470-0000-4c6e-8f7a-000000000002"
	if got := startHook(t, e, hookInputWith(t, "SessionStart", next, map[string]any{"cwd": repoDir, "source": "clear"})); !strings.Contains(got, "2 unread messages") {
		t.Errorf("the /clear's context:\n%s", got)
	}

	d.stop()
	start := time.Now()
	if got := startHook(t, e, hookInputWith(t, "SessionStart", id, map[string]any{"cwd": repoDir, "source": "resume"})); got != "" {
		t.Errorf("with the daemon down: %q, want no context", got)
	}
	t.Logf("SessionStart with the daemon down took %v", time.Since(start).Round(time.Millisecond))
}
