package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/messages"
)

// launched is a `claudemesh launch -- sh -c …` whose child prints lines
// the test reads and waits on its stdin.
type launched struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	stderr *syncBuffer
}

func startLaunch(t *testing.T, e *env, script string, args ...string) *launched {
	t.Helper()
	cmd := exec.Command(binPath, append(append([]string{"launch"}, args...), "--", "sh", "-c", script)...)
	cmd.Env = e.environ()
	l := &launched{cmd: cmd, stderr: &syncBuffer{}}
	cmd.Stderr = l.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if l.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	l.lines = bufio.NewScanner(out)
	return l
}

// line reads the child's next line of output.
func (l *launched) line(t *testing.T) string {
	t.Helper()
	got := make(chan bool, 1)
	go func() { got <- l.lines.Scan() }()
	select {
	case ok := <-got:
		if !ok {
			t.Fatalf("launch's output ended; stderr:\n%s", l.stderr)
		}
		return l.lines.Text()
	case <-time.After(cliDeadline):
		t.Fatalf("no line from the launched command within %s; stderr:\n%s", cliDeadline, l.stderr)
	}
	return ""
}

// wait waits for launch to exit and returns its exit code.
func (l *launched) wait(t *testing.T) int {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = l.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(cliDeadline):
		t.Fatalf("launch still running after %s; stderr:\n%s", cliDeadline, l.stderr)
	}
	return l.cmd.ProcessState.ExitCode()
}

// sessionIDs are the session ids GET /v1/sessions lists.
func sessionIDs(t *testing.T, c *http.Client) []string {
	t.Helper()
	var list messages.SessionList
	if st, _, err := getJSON(c, "http://localhost/v1/sessions", &list); err != nil || st != http.StatusOK {
		t.Fatalf("GET /v1/sessions: %d %v", st, err)
	}
	var ids []string
	for _, s := range list.Sessions {
		ids = append(ids, s.SessionID)
	}
	return ids
}

// TestLaunch: `claudemesh launch -- <command>` registers a session for the
// command's lifetime, hands it the token file (0600 in a 0700 directory),
// the session id and the mesh in its environment, and passes its exit code
// on; the session and the directory are gone afterwards.
func TestLaunch(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()

	l := startLaunch(t, e, `printf '%s\n' "$CLAUDEMESH_IPC_TOKEN_FILE" "$CLAUDEMESH_SESSION_ID" "$CLAUDEMESH_MESH" "$CLAUDEMESH_DISPLAY_NAME"; read line; exit 7`,
		"--name", "launched-one")
	tokenFile, sessionID, mesh, name := l.line(t), l.line(t), l.line(t), l.line(t)
	if tokenFile == "" || sessionID == "" || mesh != "local" || name != "launched-one" {
		t.Fatalf("the child's environment: token file %q, session id %q, mesh %q, name %q", tokenFile, sessionID, mesh, name)
	}
	st, err := os.Stat(tokenFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file %s: %v, mode %v", tokenFile, err, st.Mode())
	}
	if dst, err := os.Stat(filepath.Dir(tokenFile)); err != nil || dst.Mode().Perm() != 0o700 {
		t.Fatalf("token directory: %v, mode %v", err, dst.Mode())
	}
	raw, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(raw))
	if !messages.ValidSessionToken(token) {
		t.Fatalf("token file holds %q", raw)
	}
	req := newRequest(t, http.MethodGet, "http://localhost/v1/sessions/me", nil)
	req.Header.Set("Authorization", messages.SessionHeader+" "+token)
	r := do(t, c, req)
	var me messages.SessionMe
	if r.status != http.StatusOK || json.Unmarshal(r.body, &me) != nil || me.Session.SessionID != sessionID ||
		me.Session.DisplayName != "launched-one" || me.Session.PID != l.cmd.Process.Pid {
		t.Fatalf("GET /v1/sessions/me with the token: %d %s (launch pid %d)", r.status, r.body, l.cmd.Process.Pid)
	}
	if ids := sessionIDs(t, c); len(ids) != 1 || ids[0] != sessionID {
		t.Fatalf("GET /v1/sessions while the child runs: %v, want [%s]", ids, sessionID)
	}

	if _, err := l.stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if code := l.wait(t); code != 7 {
		t.Fatalf("launch exited %d, want the child's 7; stderr:\n%s", code, l.stderr)
	}
	if ids := sessionIDs(t, c); len(ids) != 0 {
		t.Errorf("sessions after the child exited: %v", ids)
	}
	if _, err := os.Stat(filepath.Dir(tokenFile)); !os.IsNotExist(err) {
		t.Errorf("the token directory is still there: %v", err)
	}
	t.Log("checked: launch registers the session while its child runs, with the token file 0600 in a 0700 directory and the env vars; " +
		"the exit code passes through; the session and the directory are gone afterwards")
}

// TestLaunchSignals: launch forwards SIGTERM to its child and exits with
// the child's code; a child killed by a signal gives 128 + the signal.
func TestLaunchSignals(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()

	l := startLaunch(t, e, `trap 'echo got-term; exit 9' TERM; echo ready; while :; do sleep 0.05; done`)
	if got := l.line(t); got != "ready" {
		t.Fatalf("child said %q", got)
	}
	if err := l.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := l.line(t); got != "got-term" {
		t.Fatalf("child said %q after SIGTERM to launch", got)
	}
	if code := l.wait(t); code != 9 {
		t.Fatalf("launch exited %d, want 9; stderr:\n%s", code, l.stderr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), cliDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "launch", "--", "sh", "-c", "kill -KILL $$")
	cmd.Env = e.environ()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	_ = cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGKILL) {
		t.Fatalf("launch of a child killed by SIGKILL exited %d, want %d; stderr:\n%s", code, 128+int(syscall.SIGKILL), stderr.String())
	}
	if r := runCLI(t, e, "launch", "--", "/nonexistent/command"); r.code != 127 {
		t.Errorf("launch of a missing command exited %d, want 127: %s", r.code, r.stderr)
	}
	if ids := sessionIDs(t, c); len(ids) != 0 {
		t.Errorf("sessions left behind: %v", ids)
	}
	t.Log("checked: SIGTERM reaches the child and its exit code passes through; a signal death is 128+N; a missing command 127; no session is left behind")
}

// TestLaunchMCPAttaches: `claudemesh mcp` run by `claudemesh launch` speaks
// as the launched session (it finds it through CLAUDEMESH_IPC_TOKEN_FILE)
// and leaves its end to launch.
func TestLaunchMCPAttaches(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()

	cmd := exec.Command(binPath, "launch", "--name", "carol", "--", binPath, "mcp")
	cmd.Env = e.environ()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "claudemesh-integration", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), mcpDeadline)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect through launch: %v; stderr:\n%s", err, stderr)
	}
	p := &mcpProc{t: t, name: "carol", cs: cs, stderr: stderr}
	var list messages.SessionList
	if st, _, err := getJSON(c, "http://localhost/v1/sessions", &list); err != nil || st != http.StatusOK ||
		len(list.Sessions) != 1 || list.Sessions[0].DisplayName != "carol" || list.Sessions[0].PID != cmd.Process.Pid {
		t.Fatalf("GET /v1/sessions: %d %v %+v (launch pid %d)", st, err, list.Sessions, cmd.Process.Pid)
	}
	var r peersResult
	p.mustCall("list_peers", map[string]any{}, &r)
	if r.You != "carol" {
		t.Fatalf("the MCP server speaks as %q, want the launched session carol", r.You)
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("launch exited %d; stderr:\n%s", code, stderr)
	}
	if ids := sessionIDs(t, c); len(ids) != 0 {
		t.Errorf("sessions after launch ended: %v", ids)
	}
	if !strings.Contains(stderr.String(), "owned=false") {
		t.Errorf("the MCP server did not attach to the launched session; stderr:\n%s", stderr)
	}
	t.Log("checked: an MCP server under launch speaks as the launched session, and launch ends it")
}
