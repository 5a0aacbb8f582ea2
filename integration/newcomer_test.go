package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// localDaemon starts a daemon on the embedded broker's local mesh, as a
// newcomer's first `claudemesh daemon up` does (no mesh joined), and
// waits for the mesh to connect.
func localDaemon(t *testing.T) (*env, *http.Client) {
	t.Helper()
	e := newEnv(t)
	if err := os.Remove(filepath.Join(e.configDir, "config.json")); err != nil { // the default: no mesh joined
		t.Fatal(err)
	}
	startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	t.Cleanup(c.CloseIdleConnections)
	wait.For(t, e2eConnectDeadline, "the local mesh on the embedded broker", func() bool { return meshConnected(c, "local") })
	return e, c
}

// TestAPIQuickStart runs the quick-start of docs/API.md ("Sending over the
// socket") and holds the page to what a newcomer sees: the repeated
// request answers 200 duplicate once the first went out, another body
// under the id is the 409 of a done row, and a `#<id>` is a topic's id
// the mesh has (an id-shaped name of none is 404).
func TestAPIQuickStart(t *testing.T) {
	t.Parallel()
	e, c := localDaemon(t)
	if r := runCLI(t, e, "topic", "create", "builds"); r.code != 0 {
		t.Fatalf("topic create builds: exit %d\n%s", r.code, r.stderr)
	}
	send := func(body string) *response {
		req := newRequest(t, http.MethodPost, "http://localhost/v1/send", []byte(body))
		req.Header.Set("Idempotency-Key", "build-42-done")
		return do(t, c, req)
	}
	const green = `{"to":"#builds","message":"build 42 is green","priority":"next"}`
	if r := send(green); r.status != http.StatusAccepted || string(r.body) != `{"client_message_id":"build-42-done","status":"queued"}`+"\n" {
		t.Fatalf("first send: %d %s; want 202 queued", r.status, r.body)
	}
	var dup map[string]any
	wait.For(t, e2eDeliverDeadline, "the repeated request to answer 200 duplicate", func() bool {
		r := send(green)
		if r.status == http.StatusAccepted {
			return false // still on its way to the broker
		}
		if dup = r.json(t); r.status != http.StatusOK {
			t.Fatalf("repeated send: %d %s; want 202 until sent, then 200", r.status, r.body)
		}
		return true
	})
	if dup["duplicate"] != true || dup["client_message_id"] != "build-42-done" || dup["broker_message_id"] == nil || dup["history_id"] == nil {
		t.Errorf("repeated send answered %v; want duplicate:true with the broker's ids", dup)
	}
	r := send(`{"to":"#builds","message":"build 42 is red","priority":"next"}`)
	conflict := r.json(t)
	if r.status != http.StatusConflict || conflict["error"] != "idempotency_key_reused" ||
		conflict["conflict"] != "outbox_done_fingerprint_mismatch" || conflict["broker_message_id"] != dup["broker_message_id"] {
		t.Errorf("another body under the id: %d %s; want 409 outbox_done_fingerprint_mismatch naming the broker's id", r.status, r.body)
	}

	list := runCLI(t, e, "topic", "list", "--json")
	var topics struct {
		Topics []struct{ ID, Name string }
	}
	if err := json.Unmarshal([]byte(list.stdout), &topics); err != nil || len(topics.Topics) != 1 || topics.Topics[0].Name != "builds" {
		t.Fatalf("topic list --json: %v %q", err, list.stdout)
	}
	if r := post(t, c, sendBody(t, "#"+topics.Topics[0].ID, "by id", "")); r.status != http.StatusAccepted {
		t.Errorf("send to #<the topic's id>: %d %s; want 202", r.status, r.body)
	}
	unknown := strings.Repeat("A", 24)
	if r := post(t, c, sendBody(t, "#"+unknown, "no such topic", "")); r.status != http.StatusNotFound || r.json(t)["error"] != "topic_not_found" {
		t.Errorf("send to #%s (id-shaped, no topic): %d %s; want 404 topic_not_found", unknown, r.status, r.body)
	}
}

// TestHelpShowsEnvAndHints: a command with commands of its own ends its
// --help with how to read theirs, as the top level does, and the flags
// the environment sets name their variable.
func TestHelpShowsEnvAndHints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{`Run "claudemesh <command> --help"`, "($CLAUDEMESH_DAEMON_DIR)", "($CLAUDEMESH_CONFIG_DIR)"}},
		{[]string{"daemon", "--help"}, []string{`Run "claudemesh daemon <command> --help" for more information on a command.`}},
		{[]string{"daemon", "outbox", "--help"}, []string{`Run "claudemesh daemon outbox <command> --help"`}},
		{[]string{"broker", "--help"}, []string{`Run "claudemesh broker <command> --help"`}},
		{[]string{"daemon", "up", "--help"}, []string{"($CLAUDEMESH_TCP)", "($CLAUDEMESH_LOG_LEVEL)", "($CLAUDEMESH_DAEMON_DIR)"}},
		{[]string{"broker", "up", "--help"}, []string{"($CLAUDEMESH_LOG_LEVEL)", "($CLAUDEMESH_DATABASE_URL)"}},
		{[]string{"launch", "--help"}, []string{"($CLAUDEMESH_MESH)"}},
		{[]string{"mcp", "--help"}, []string{"($CLAUDEMESH_MESH)"}},
	} {
		r := runCLI(t, e, c.args...)
		for _, want := range c.want {
			if r.code != 0 || !strings.Contains(r.stdout, want) {
				t.Errorf("claudemesh %s: exit %d, want %q in:\n%s", strings.Join(c.args, " "), r.code, want, r.stdout)
			}
		}
	}
	if r := runCLI(t, e, "daemon", "status", "--help"); strings.Contains(r.stdout, "<command> --help") {
		t.Errorf("daemon status --help, a command without commands, points to theirs:\n%s", r.stdout)
	}
}

// TestDirectoryFlags: --daemon-dir and --config-dir do what the variables
// they are bound to do, for the command and for the daemon it detaches.
func TestDirectoryFlags(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bare := &env{t: t, daemonDir: t.TempDir(), configDir: t.TempDir()} // the variables name directories nothing uses
	dirs := []string{"--daemon-dir", e.daemonDir, "--config-dir", e.configDir}
	if r := runCLI(t, bare, append(dirs, "daemon", "up", "--no-tcp")...); r.code != 0 {
		t.Fatalf("daemon up with the directory flags: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Cleanup(func() { runCLI(t, e, "daemon", "down") })
	if !e.exists("daemon.sock") || !e.exists("daemon.log") {
		t.Errorf("the detached daemon did not use --daemon-dir %s", e.daemonDir)
	}
	if r := runCLI(t, bare, append(dirs, "daemon", "status")...); r.code != 0 || !strings.Contains(r.stdout, e.socket()) {
		t.Errorf("daemon status with the directory flags: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, bare, "daemon", "status"); r.code != 1 {
		t.Errorf("daemon status in the directories of the variables: exit %d, want 1 (no daemon there)\n%s", r.code, r.stdout)
	}
}

// stampRE is a moment as every human-readable output prints it: RFC 3339
// in UTC to the millisecond.
var stampRE = regexp.MustCompile(`\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)

// TestTimestampsOneWidth: the moments the commands print — the daemon's,
// the broker's, the command's own — are of one width.
func TestTimestampsOneWidth(t *testing.T) {
	t.Parallel()
	e, _ := localDaemon(t)
	for _, args := range [][]string{
		{"state", "set", "release", `{"version":"2.14.0"}`},
		{"remember", "the deploy is frozen"},
		{"topic", "create", "builds"},
		{"send", "#builds", "green"},
	} {
		if r := runCLI(t, e, args...); r.code != 0 {
			t.Fatalf("claudemesh %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	for _, args := range [][]string{
		{"daemon", "inbox", "--since", "1h"}, // no messages since <now - 1 h>
		{"lock", "acquire", "release-branch", "--ttl", "1m"},
		{"state", "get", "release"},
		{"state", "list"},
		{"recall", "deploy"},
		{"topic", "history", "builds"},
		{"daemon", "outbox", "list"},
		{"daemon", "audit", "list"},
	} {
		r := runCLI(t, e, args...)
		stamps := stampRE.FindAllString(r.stdout, -1)
		if r.code != 0 || len(stamps) == 0 {
			t.Errorf("claudemesh %s: exit %d, no moment printed:\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		for _, s := range stamps {
			if len(s) != len("2026-12-08T00:19:22.520Z") || !strings.HasSuffix(s, "Z") {
				t.Errorf("claudemesh %s printed %q, want RFC 3339 in UTC to the millisecond:\n%s", strings.Join(args, " "), s, r.stdout)
			}
		}
	}
}

// TestStatusCommand: `claudemesh status` is `daemon status` and the
// sessions; `daemon status` counts the live sessions, and prints the
// receivers' last failure with its time, agent and event (hooks.errors
// holds a Unix millisecond and tabs).
func TestStatusCommand(t *testing.T) {
	t.Parallel()
	e, _ := localDaemon(t)
	if r := runCLI(t, e, "status"); r.code != 0 || !strings.Contains(r.stdout, "agent sessions: none live") ||
		!strings.Contains(r.stdout, "MESH   MEMBER") {
		t.Errorf("status with no session: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	registerSession(t, e.socket(), "local", "sess-planner", "planner")
	registerSession(t, e.socket(), "local", "sess-coder", "coder")
	r := runCLI(t, e, "daemon", "status")
	if r.code != 0 || !strings.Contains(r.stdout, "agent sessions: 2 live (claudemesh status lists them)") || strings.Contains(r.stdout, "sess-planner") {
		t.Errorf("daemon status: exit %d, want the count of live sessions and not the list:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, e, "status")
	if r.code != 0 || !strings.Contains(r.stdout, "agent sessions: 2 live, below") ||
		!regexp.MustCompile(`(?m)^MESH +NAME +SESSION +PID +PUBKEY +REGISTERED$`).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m)^local +planner +sess-planner `).MatchString(r.stdout) || !strings.Contains(r.stdout, "sess-coder") {
		t.Errorf("status: exit %d, want daemon status and the sessions:\n%s%s", r.code, r.stdout, r.stderr)
	}
	var report struct {
		Running      bool `json:"running"`
		LiveSessions *int `json:"live_sessions"`
		Sessions     []struct {
			SessionID string `json:"sessionId"`
		} `json:"sessions"`
	}
	r = runCLI(t, e, "status", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &report); err != nil || !report.Running || report.LiveSessions == nil ||
		*report.LiveSessions != 2 || len(report.Sessions) != 2 {
		t.Errorf("status --json: %v\n%s", err, r.stdout)
	}

	bad := runCLI(t, e, "hook", "Stop") // stdin is empty: not a JSON object
	if bad.code != 0 || !e.exists("hooks.errors") {
		t.Fatalf("hook with no input: exit %d, no hooks.errors\n%s", bad.code, bad.stderr)
	}
	r = runCLI(t, e, "daemon", "status")
	last := regexp.MustCompile(`(?m)^  last receiver error \(hooks\.errors\): (\S+) claude Stop: (.*)$`).FindStringSubmatch(r.stdout)
	if last == nil || len(last[1]) != len("2026-12-08T00:19:22.520Z") || strings.Contains(last[2], `\t`) {
		t.Errorf("daemon status: want the receiver's failure as <time> <agent> <event>: <error>:\n%s", r.stdout)
	}
}

// TestLogsLevelThenLines: `daemon logs --level warn -n N` prints the last
// N warnings however many records below the level follow them.
func TestLogsLevelThenLines(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var log strings.Builder
	for i := range 3 {
		fmt.Fprintf(&log, `{"time":"2026-12-08T00:00:0%dZ","level":"WARN","msg":"broker_slow","n":%d}`+"\n", i, i)
		for range 100 {
			log.WriteString(`{"time":"2026-12-08T00:00:09Z","level":"INFO","msg":"batch committed"}` + "\n")
		}
	}
	if err := os.WriteFile(e.file("daemon.log"), []byte(log.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string]int{"50": 3, "2": 2} {
		r := runCLI(t, e, "daemon", "logs", "--level", "warn", "-n", n)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		if r.code != 0 || len(lines) != want || !strings.Contains(lines[want-1], "WARN  broker_slow n=2") {
			t.Errorf("daemon logs --level warn -n %s: exit %d, want the last %d warnings:\n%s%s", n, r.code, want, r.stdout, r.stderr)
		}
	}
}

// TestJournalPriorities: under systemd (stderr is the stream
// JOURNAL_STREAM names) the daemon's and the broker's records start with
// their syslog priority, as journalctl -p reads it.
func TestJournalPriorities(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // its mesh's broker never answers: the daemon warns
	for _, c := range []struct {
		args []string
		want []string // a line for each: priority, then the record's message
	}{
		{[]string{"daemon", "up", "--foreground", "--no-tcp"}, []string{`<6>.*"msg":"daemon_started"`, `<4>.*"msg":"broker_connect_failed"`}},
		{[]string{"broker", "up", "--listen", "127.0.0.1:0", "--dir", filepath.Join(e.daemonDir, "broker")}, []string{`<6>.*"msg":"broker_store_open"`}},
	} {
		stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
		if err != nil {
			t.Fatal(err)
		}
		defer stderr.Close()
		fi, err := stderr.Stat()
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		cmd := exec.Command(binPath, c.args...)
		cmd.Env = append(e.environ(), fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino))
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		read := func() string { b, _ := os.ReadFile(stderr.Name()); return string(b) }
		wait.For(t, startDeadline, "the records of "+strings.Join(c.args[:2], " "), func() bool {
			for _, want := range c.want {
				if !regexp.MustCompile(`(?m)^` + want).MatchString(read()) {
					return false
				}
			}
			return true
		})
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		for _, line := range strings.Split(strings.TrimSuffix(read(), "\n"), "\n") {
			if !strings.Contains(line, `{"time":`) {
				continue // a line for people (broker listening on …): the journal's default, info
			}
			if !regexp.MustCompile(`^<[3467]>\{"time":`).MatchString(line) ||
				strings.Contains(line, `"level":"WARN"`) != strings.HasPrefix(line, "<4>") ||
				strings.Contains(line, `"level":"INFO"`) != strings.HasPrefix(line, "<6>") {
				t.Errorf("%s: a record without its priority, or with another level's: %q", strings.Join(c.args[:2], " "), line)
			}
		}
	}
}
