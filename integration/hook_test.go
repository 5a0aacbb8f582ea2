package integration

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/hookoutbox"
)

// The agent-hook outbox (spec/hook-outbox.md) with real processes: the
// `claudemesh hook` receiver fed the JSON Claude Code sends (the samples
// of messages/hookevent/testdata), a daemon, and hooks.db read beside it.

// hookEnv is a daemon environment on the embedded broker (no membership:
// the daemon makes a local mesh of its own), so that the presence the
// hooks set reaches a broker.
func hookEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	if err := os.Remove(filepath.Join(e.configDir, "config.json")); err != nil {
		t.Fatal(err)
	}
	return e
}

// hookInput is Claude Code's JSON for event, for session.
func hookInput(t testing.TB, event, session string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "messages", "hookevent", "testdata", "claude-"+event+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["session_id"] = session
	out, _ := json.Marshal(m)
	return out
}

// runHook runs the receiver as a hook does: the JSON on stdin. bin is
// hookBinPath (`claudemesh-hook <event>`, what install writes) or binPath
// (`claudemesh hook <event>`). It must exit 0 and print nothing.
func runHook(t *testing.T, e *env, bin, event string, input []byte) {
	t.Helper()
	cmd := exec.Command(bin, "hook", event)
	if bin == hookBinPath {
		cmd = exec.Command(bin, event)
	}
	cmd.Env = e.environ()
	cmd.Stdin = bytes.NewReader(input)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || out.Len() > 0 {
		t.Errorf("claudemesh hook %s: %v, output %q", event, err, out.String())
	}
}

// hookRow is a hook_outbox row as the tests read it.
type hookRow struct {
	id          int64
	session     string
	typ         string
	outcome     string
	lastError   string
	attempts    int
	lockedAt    sql.NullInt64
	deliveredAt sql.NullInt64
}

// hookRows reads hooks.db (beside the daemon: WAL lets it), by id.
func hookRows(t testing.TB, e *env) []hookRow {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.file("hooks.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rs, err := db.Query(`SELECT id, session_id, event_type, COALESCE(outcome, ''), COALESCE(last_error, ''), attempt_count,
	  locked_at, delivered_at FROM hook_outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []hookRow
	for rs.Next() {
		var r hookRow
		if err := rs.Scan(&r.id, &r.session, &r.typ, &r.outcome, &r.lastError, &r.attempts, &r.lockedAt, &r.deliveredAt); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func undelivered(rows []hookRow) int {
	n := 0
	for _, r := range rows {
		if !r.deliveredAt.Valid {
			n++
		}
	}
	return n
}

// critical are the internal types never dropped, which the daemon
// publishes as agent_event.
var critical = map[string]bool{"session_start": true, "user_prompt_submit": true, "agent_stop": true, "notification": true,
	"error": true}

// agentEvent is the data of an agent_event.
type agentEvent struct {
	Mesh      string `json:"mesh"`
	SessionID string `json:"session_id"`
	EventType string `json:"event_type"`
	State     string `json:"state"`
	HookID    int64  `json:"hook_id"`
}

// agentEvents reads agent_events from s until want have come (or within
// passes), by session, in the order the stream gave them.
func agentEvents(t *testing.T, s *sseStream, want int, within time.Duration) map[string][]agentEvent {
	t.Helper()
	out := map[string][]agentEvent{}
	for range want {
		ev := s.next("agent_event", within)
		var a agentEvent
		if err := json.Unmarshal(ev.Data, &a); err != nil {
			t.Fatalf("agent_event %d: %v: %s", ev.ID, err, ev.Data)
		}
		out[a.SessionID] = append(out[a.SessionID], a)
	}
	return out
}

// TestHookReceiverWithoutDaemon: receivers run while no daemon does; their
// rows wait in hooks.db. Once a daemon starts, every row is delivered,
// each session's in order: its sessions register (the hooks' own
// session ids), their presence and live state follow what they did.
func TestHookReceiverWithoutDaemon(t *testing.T) {
	t.Parallel()
	e := hookEnv(t)
	sessions := []string{"9f3c2a1e-0000-4c6e-8f7a-000000000001", "9f3c2a1e-0000-4c6e-8f7a-000000000002",
		"9f3c2a1e-0000-4c6e-8f7a-000000000003"}
	events := []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Notification", "Stop"}
	for _, ev := range events {
		for _, s := range sessions {
			runHook(t, e, binPath, ev, hookInput(t, ev, s))
		}
	}
	rows := hookRows(t, e)
	if len(rows) != len(events)*len(sessions) || undelivered(rows) != len(rows) {
		t.Fatalf("%d rows, %d undelivered; want %d waiting", len(rows), undelivered(rows), len(events)*len(sessions))
	}
	if e.exists("hooks.errors") {
		t.Fatalf("hooks.errors: %s", readTrimmed(t, e, "hooks.errors"))
	}

	startDaemon(t, e, "--no-tcp")
	stream := openSSE(t, e.socket(), "0")
	got := agentEvents(t, stream, 4*len(sessions), 30*time.Second) // SessionStart, UserPromptSubmit, Notification, Stop
	wait.For(t, 30*time.Second, "every row delivered", func() bool { return undelivered(hookRows(t, e)) == 0 })
	for _, s := range sessions {
		var ids []int64
		var types []string
		for _, a := range got[s] {
			ids, types = append(ids, a.HookID), append(types, a.EventType)
			if !strings.HasSuffix(a.Mesh, "/"+s) {
				t.Errorf("agent_event of %s on mesh %q, want its route", s, a.Mesh)
			}
		}
		if !slices.IsSorted(ids) || !slices.Equal(types, []string{"session_start", "user_prompt_submit", "notification", "agent_stop"}) {
			t.Errorf("session %s: agent_events %v %v, want its rows in order", s, ids, types)
		}
	}
	for _, r := range hookRows(t, e) {
		if critical[r.typ] && r.outcome != messages.HookDelivered {
			t.Errorf("row %+v", r)
		}
	}
	var list []messages.SessionInfo
	if r := runCLI(t, e, "sessions", "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil {
		t.Fatalf("claudemesh sessions: %d %s%s", r.code, r.stdout, r.stderr)
	}
	if len(list) != len(sessions) {
		t.Fatalf("%d sessions registered, want %d: %+v", len(list), len(sessions), list)
	}
	for _, s := range list {
		if s.Live == nil || s.Live.State != messages.AgentIdle || s.Live.LastEvent != "agent_stop" || s.PID != os.Getpid() {
			t.Errorf("session %s: live %+v pid %d", s.SessionID, s.Live, s.PID)
		}
	}
	// The broker has each session's presence: idle, the turn's last
	// message as its summary; peers shows the live state beside it.
	var peers []struct {
		Pubkey  string               `json:"pubkey"`
		Status  string               `json:"status"`
		Summary string               `json:"summary"`
		Live    *messages.AgentState `json:"live"`
	}
	wait.For(t, 20*time.Second, "three sessions idle with a summary in peers", func() bool {
		r := runCLI(t, e, "peers", "--json")
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &peers) != nil {
			return false
		}
		n := 0
		for _, p := range peers {
			if p.Live != nil && p.Live.State == "idle" && p.Status == "idle" && strings.HasPrefix(p.Summary, "The test waited") {
				n++
			}
		}
		return n == len(sessions)
	})
	if r := runCLI(t, e, "peers"); !strings.Contains(r.stdout, "STATE") || !strings.Contains(r.stdout, "idle") {
		t.Errorf("claudemesh peers:\n%s", r.stdout)
	}
	var h messages.Health
	if st, _, err := getJSON(unixClient(e.socket()), "http://localhost/v1/health", &h); err != nil || st != 200 || h.Hooks == nil ||
		h.Hooks.Backlog != 0 || h.Hooks.ReceiverWriteErrors != 0 {
		t.Fatalf("health: %d %v %+v", st, err, h.Hooks)
	}
}

// hookPattern is what each session of TestHookReceiversConcurrent does,
// over and over: a prompt, tools, a notification, more tools, a stop.
var hookPattern = []string{"UserPromptSubmit", "PreToolUse", "PostToolUse", "PreToolUse", "PostToolUse", "PreToolUse",
	"PostToolUse", "Notification", "PreToolUse", "Stop"}

// TestHookFirstPresenceWaitsForLink: the first event of a session the
// hooks register sets its presence once its broker connection — dialled
// at the registration — is up: each row is delivered at its first
// attempt, and no profile_not_applied or hook_retry is logged. Before,
// the presence was asked of a connection still dialling:
// broker_unavailable, a WARN, and the row retried a second later (the
// agent shown idle meanwhile).
func TestHookFirstPresenceWaitsForLink(t *testing.T) {
	t.Parallel()
	e := hookEnv(t)
	d := startDaemon(t, e, "--no-tcp")
	const n = 6
	for i := range n {
		runHook(t, e, hookBinPath, "SessionStart", hookInput(t, "SessionStart", fmt.Sprintf("5e7a0c11-0000-4c6e-8f7a-%012d", i)))
	}
	wait.For(t, 30*time.Second, "every row delivered", func() bool {
		rows := hookRows(t, e)
		return len(rows) == n && undelivered(rows) == 0
	})
	for _, r := range hookRows(t, e) {
		if r.attempts != 0 || r.outcome != messages.HookDelivered { // attempt_count counts the failed ones
			t.Errorf("row %+v: want delivered at its first attempt", r)
		}
	}
	for _, line := range strings.Split(d.stderr.String(), "\n") {
		if strings.Contains(line, `"msg":"profile_not_applied"`) || strings.Contains(line, `"msg":"hook_retry"`) {
			t.Errorf("daemon log: %s", line)
		}
	}
}

// TestHookReceiversConcurrent: 8 sessions × 500 events, each session's
// written in order by receiver processes, the sessions concurrently; the
// daemon starts when half are written. No event is lost, each session's
// order is kept, no critical event is dropped, and the bursty ones that
// piled up are coalesced. The suite runs 8 × 60 (4,000 processes of this
// binary take four minutes of a 2-core machine);
// CLAUDEMESH_TEST_HOOK_EVENTS=500 runs the full 8 × 500.
func TestHookReceiversConcurrent(t *testing.T) {
	t.Parallel()
	sessions, perSession := 8, 60
	if n, err := strconv.Atoi(os.Getenv("CLAUDEMESH_TEST_HOOK_EVENTS")); err == nil && n > 0 {
		perSession = n
	}
	e := hookEnv(t)
	inputs := map[string][]byte{}
	for _, ev := range append(slices.Clone(hookPattern), "SessionStart") {
		inputs[ev] = hookInput(t, ev, "SESSION")
	}
	var written atomic.Int64
	half := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for i := range sessions {
		s := fmt.Sprintf("concurrent-%d", i)
		wg.Go(func() {
			for k := range perSession {
				ev := "SessionStart"
				if k > 0 {
					ev = hookPattern[(k-1)%len(hookPattern)]
				}
				runHook(t, e, hookBinPath, ev, bytes.ReplaceAll(inputs[ev], []byte("SESSION"), []byte(s)))
				if written.Add(1) >= int64(sessions*perSession/2) {
					once.Do(func() { close(half) })
				}
			}
		})
	}
	<-half
	// Receivers that run while no daemon does keep the WAL near its bound
	// (hookoutbox.MaxWAL): each one would otherwise read all of it.
	if st, err := os.Stat(e.file("hooks.db-wal")); err != nil || st.Size() > 2*hookoutbox.MaxWAL {
		t.Errorf("hooks.db-wal after %d events without a daemon: %v %v, want at most %d bytes", written.Load(), st.Size(), err,
			2*hookoutbox.MaxWAL)
	}
	startDaemon(t, e, "--no-tcp")
	stream := openSSE(t, e.socket(), "0")
	wg.Wait()
	rows := hookRows(t, e)
	if len(rows) != sessions*perSession {
		t.Fatalf("%d rows in hooks.db, want %d: an event was lost", len(rows), sessions*perSession)
	}
	bySession := map[string][]int64{} // the critical rows of each session, in id order
	for _, r := range rows {
		if critical[r.typ] {
			bySession[r.session] = append(bySession[r.session], r.id)
		}
	}
	want := 0
	for _, ids := range bySession {
		want += len(ids)
	}
	got := agentEvents(t, stream, want, 60*time.Second)
	for s, ids := range bySession {
		var seen []int64
		for _, a := range got[s] {
			seen = append(seen, a.HookID)
		}
		if !slices.Equal(seen, ids) {
			t.Errorf("session %s: critical rows published %v\nwant, in order, %v", s, seen, ids)
		}
	}
	wait.For(t, 60*time.Second, "every row delivered", func() bool { rows = hookRows(t, e); return undelivered(rows) == 0 })
	coalesced := 0
	for _, r := range rows {
		switch {
		case critical[r.typ] && r.outcome != messages.HookDelivered:
			t.Errorf("critical row %+v", r)
		case r.outcome == messages.HookCoalesced && !strings.HasPrefix(r.lastError, "coalesced: superseded by hook row"):
			t.Errorf("coalesced row without its note: %+v", r)
		case r.outcome == messages.HookCoalesced:
			coalesced++
		case r.outcome != messages.HookDelivered && r.outcome != messages.HookEvicted:
			t.Errorf("row %+v", r)
		}
	}
	if coalesced == 0 {
		t.Error("no bursty row was coalesced, though half of them waited for the daemon")
	}
	t.Logf("%d rows: %d coalesced", len(rows), coalesced)
	if e.exists("hooks.errors") {
		t.Errorf("hooks.errors: %s", readTrimmed(t, e, "hooks.errors"))
	}
}

// TestHookWorkerKilledMidRow: the daemon is killed while a handler is in
// the middle of a row (a faults build holds it there). The next daemon
// leaves that session alone until the row's lock is older than the cutoff
// (3 s here) — another session goes on meanwhile — then handles the row
// again, and the session's later row after it; the session is registered
// once.
func TestHookWorkerKilledMidRow(t *testing.T) {
	t.Parallel()
	e := hookEnv(t)
	e.bin = faultsBinary(t)
	const a, b = "killed-a", "killed-b"
	stalled := withEnv(e, "CLAUDEMESH_FAULT_HOOK_STALL=user_prompt_submit", "CLAUDEMESH_FAULT_HOOK_LOCK_CUTOFF=3s")
	d := startDaemon(t, stalled, "--no-tcp")
	runHook(t, e, hookBinPath, "SessionStart", hookInput(t, "SessionStart", a))
	runHook(t, e, hookBinPath, "UserPromptSubmit", hookInput(t, "UserPromptSubmit", a))
	runHook(t, e, hookBinPath, "Stop", hookInput(t, "Stop", a))
	var prompt hookRow
	wait.For(t, 20*time.Second, "the prompt's handler holding its row", func() bool {
		rows := hookRows(t, e)
		if len(rows) < 3 || !rows[0].deliveredAt.Valid || !rows[1].lockedAt.Valid {
			return false
		}
		prompt = rows[1]
		// Its work is done (the stall comes after it): published.
		return strings.Contains(d.stderr.String(), "hook_stall_fault")
	})
	published := func(s *sseStream) { // the prompt's agent_event: its handler did its work
		t.Helper()
		for {
			var ae agentEvent
			json.Unmarshal(s.next("agent_event", 20*time.Second).Data, &ae)
			if ae.HookID == prompt.id {
				return
			}
		}
	}
	published(openSSE(t, e.socket(), "0"))
	d.kill9()
	if rows := hookRows(t, e); rows[1].deliveredAt.Valid || rows[2].deliveredAt.Valid {
		t.Fatalf("rows delivered before the kill: %+v", rows)
	}

	restarted := withEnv(e, "CLAUDEMESH_FAULT_HOOK_LOCK_CUTOFF=3s")
	startDaemon(t, restarted, "--no-tcp")
	runHook(t, e, hookBinPath, "PreToolUse", hookInput(t, "PreToolUse", b)) // handled at its first attempt: no broker in the way
	wait.For(t, 20*time.Second, "the other session's row delivered", func() bool {
		rows := hookRows(t, e)
		return len(rows) == 4 && rows[3].deliveredAt.Valid
	})
	wait.For(t, 20*time.Second, "the killed session's rows delivered", func() bool { return undelivered(hookRows(t, e)) == 0 })
	rows := hookRows(t, e)
	if held := rows[1].deliveredAt.Int64 - prompt.lockedAt.Int64; held < 3000 {
		t.Errorf("the prompt's row was taken over %d ms after its lock, before the 3 s cutoff", held)
	}
	if rows[2].deliveredAt.Int64 < rows[1].deliveredAt.Int64 || rows[1].outcome != messages.HookDelivered {
		t.Errorf("the stop before the prompt it follows: %+v %+v", rows[1], rows[2])
	}
	if rows[3].deliveredAt.Int64 > rows[1].deliveredAt.Int64 || rows[3].attempts != 0 {
		t.Errorf("session b waited for session a's lock: %+v %+v", rows[3], rows[1])
	}
	// Handled twice (once by each daemon), published twice: the handlers
	// tolerate it, and the session is registered once.
	stream := openSSE(t, e.socket(), "0")
	var ids []int64
	for len(ids) < 4 { // a: start, prompt (killed), prompt, stop (b's tool call is not published)
		var ae agentEvent
		json.Unmarshal(stream.next("agent_event", 20*time.Second).Data, &ae)
		ids = append(ids, ae.HookID)
	}
	slices.Sort(ids)
	if want := []int64{rows[0].id, prompt.id, prompt.id, rows[2].id}; !slices.Equal(ids, want) {
		t.Errorf("agent_events of rows %v, want %v: the prompt's once per daemon", ids, want)
	}
	var list []messages.SessionInfo
	r := runCLI(t, e, "sessions", "--json")
	if json.Unmarshal([]byte(r.stdout), &list) != nil || len(list) != 1 || list[0].SessionID != a {
		t.Fatalf("sessions: %s", r.stdout)
	}
}

// TestHookReceiverCannotWrite: a receiver that cannot write hooks.db (the
// file is not a database) prints one line and exits 0; the failures are
// counted, and the daemon reports them (and sets the file aside).
func TestHookReceiverCannotWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := os.WriteFile(e.file("hooks.db"), bytes.Repeat([]byte("not a database "), 512), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		cmd := exec.Command(binPath, "hook", "Stop")
		cmd.Env = e.environ()
		cmd.Stdin = bytes.NewReader(hookInput(t, "Stop", "cannot-write"))
		out, err := cmd.CombinedOutput()
		if err != nil || bytes.Count(out, []byte("\n")) != 1 || !bytes.Contains(out, []byte("claudemesh hook:")) {
			t.Fatalf("receiver: %v %q", err, out)
		}
	}
	startDaemon(t, e, "--no-tcp")
	var h messages.Health
	if st, _, err := getJSON(unixClient(e.socket()), "http://localhost/v1/health", &h); err != nil || st != http.StatusOK ||
		h.Hooks == nil || h.Hooks.ReceiverWriteErrors != 2 || !strings.Contains(h.Hooks.LastReceiverError, "Stop") {
		t.Fatalf("health: %d %v %+v", st, err, h.Hooks)
	}
	if r := runCLI(t, e, "daemon", "status"); !strings.Contains(r.stdout, "2 receiver write errors") {
		t.Errorf("daemon status:\n%s", r.stdout)
	}
	// The daemon set the corrupt file aside; receivers write again.
	runHook(t, e, binPath, "Stop", hookInput(t, "Stop", "cannot-write"))
	matches, _ := filepath.Glob(e.file("hooks.db.corrupt-*"))
	if len(matches) != 1 || len(hookRows(t, e)) != 1 {
		t.Fatalf("quarantined %v, rows %+v", matches, hookRows(t, e))
	}
}

// TestHookInstallCLI: `claudemesh hook install` into a settings.json with
// hooks of its own keeps them, and the file's one-line layout; twice
// changes nothing; `install claude-code` finds it installed and registers
// the lean claudemesh-mcp; `hook uninstall` gives back the file as it
// was, byte for byte.
func TestHookInstallCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	home := t.TempDir()
	e = withEnv(e, "HOME="+home, "CLAUDE_CONFIG_DIR=")
	settings := filepath.Join(home, ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(settings), 0o700)
	const mine = `{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"~/guard.sh"}]}],` +
		`"SessionEnd":[{"hooks":[{"type":"command","command":"echo bye"}]}]},"theme":"dark"}`
	if err := os.WriteFile(settings, []byte(mine), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, e, "hook", "install", "--dry-run"); r.code != 0 || !strings.Contains(r.stdout, "\n+{\"hooks\":") ||
		!strings.Contains(r.stdout, hookBinPath+" PreToolUse") {
		t.Fatalf("dry run: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(settings); string(b) != mine {
		t.Fatal("a dry run wrote the file")
	}
	if r := runCLI(t, e, "hook", "install"); r.code != 0 {
		t.Fatalf("install: %d %s", r.code, r.stderr)
	}
	installed, _ := os.ReadFile(settings)
	for _, want := range []string{`"~/guard.sh"`, `"echo bye"`, `"theme":"dark"`, hookBinPath + ` PreToolUse"`, hookBinPath + ` Stop"`,
		hookBinPath + ` SessionEnd"`} {
		if !bytes.Contains(installed, []byte(want)) {
			t.Errorf("installed settings lack %s:\n%s", want, installed)
		}
	}
	if r := runCLI(t, e, "hook", "install"); r.code != 0 || !strings.Contains(r.stdout, "already installed") {
		t.Errorf("second install: %d %s", r.code, r.stdout)
	}
	if r := runCLI(t, e, "install", "claude-code"); r.code != 0 || !strings.Contains(r.stdout, "hooks already installed") {
		t.Errorf("install claude-code: %d %s%s", r.code, r.stdout, r.stderr)
	}
	// The MCP server registered is the lean claudemesh-mcp beside claudemesh,
	// with no diagnostic setting in its environment (it sets GODEBUG by
	// re-executing itself).
	var cfg struct {
		MCPServers map[string]struct {
			Type    string            `json:"type"`
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if b, err := os.ReadFile(filepath.Join(home, ".claude.json")); err != nil || json.Unmarshal(b, &cfg) != nil {
		t.Fatalf("~/.claude.json: %v\n%s", err, b)
	}
	if s := cfg.MCPServers["claudemesh"]; s.Type != "stdio" || s.Command != mcpBinPath || len(s.Args) != 0 ||
		len(s.Env) != 0 {
		t.Errorf("mcpServers.claudemesh = %+v, want stdio %s with no args and no environment", s, mcpBinPath)
	}
	if again, _ := os.ReadFile(settings); !bytes.Equal(again, installed) {
		t.Errorf("a second install changed the file:\n%s", again)
	}
	if r := runCLI(t, e, "hook", "uninstall"); r.code != 0 {
		t.Fatalf("uninstall: %d %s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(settings); string(b) != mine {
		t.Errorf("after uninstall\n%s\nwant the original, byte for byte\n%s", b, mine)
	}
}
