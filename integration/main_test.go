package integration

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // registers driver "sqlite"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// binPath is the claudemesh binary TestMain builds; hookBinPath and
// mcpBinPath the lean binaries it builds beside it (cmd/claudemesh-hook and
// cmd/claudemesh-mcp, which `claudemesh install claude-code` then
// registers); faultsBinPath is claudemesh built with `-tags faults` (it
// reads the fault injections from the environment), which a test that
// needs it builds (faultsBinary).
var (
	binPath, hookBinPath string
	mcpBinPath           string
	faultsBinPath        string
	faultsBuild          sync.Once
	faultsBuildErr       error
)

// Deadlines. The waits (package wait) poll until theirs.
const (
	startDeadline = 10 * time.Second
	stopDeadline  = 10 * time.Second
	cliDeadline   = 20 * time.Second
)

func TestMain(m *testing.M) {
	flag.Parse()
	if err := keepMonitorAwake(); err != nil {
		fmt.Fprintln(os.Stderr, "integration: keep the runtime's monitor awake:", err)
		os.Exit(1)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "cmbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath, faultsBinPath = filepath.Join(dir, "claudemesh"), filepath.Join(dir, "claudemesh-faults")
	hookBinPath, mcpBinPath = filepath.Join(dir, "claudemesh-hook"), filepath.Join(dir, "claudemesh-mcp")
	if err := buildBinary(binPath); err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	lean := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"github.com/claudemesh/claudemesh-go/cmd/claudemesh-hook", "github.com/claudemesh/claudemesh-go/cmd/claudemesh-mcp")
	if out, err := lean.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: go build ./cmd/claudemesh-hook ./cmd/claudemesh-mcp: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// buildBinary builds cmd/claudemesh to path, with tags.
func buildBinary(path string, tags ...string) error {
	args := []string{"build", "-o", path}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	build := exec.Command("go", append(args, "github.com/claudemesh/claudemesh-go/cmd/claudemesh")...)
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v ./cmd/claudemesh: %v\n%s", tags, err, out)
	}
	return nil
}

// faultsBinary is the binary built with `-tags faults` (once), for the
// daemons of a test that injects failures through the environment.
func faultsBinary(t *testing.T) string {
	t.Helper()
	faultsBuild.Do(func() { faultsBuildErr = buildBinary(faultsBinPath, "faults") })
	if faultsBuildErr != nil {
		t.Fatal(faultsBuildErr)
	}
	return faultsBinPath
}

// env is one test's pair of claudemesh directories.
type env struct {
	t         *testing.T
	daemonDir string
	configDir string
	extra     []string // more environment, KEY=value
	bin       string   // the daemon's binary ("": binPath)
}

// newEnv returns fresh, empty daemon and config directories, in t.TempDir
// unless that path is too long for a Unix socket.
func newEnv(t *testing.T) *env {
	t.Helper()
	root := t.TempDir()
	if len(filepath.Join(root, "d", "daemon.sock")) >= 100 {
		r, err := os.MkdirTemp("", "cm")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(r) })
		root = r
	}
	e := &env{t: t, daemonDir: filepath.Join(root, "d"), configDir: filepath.Join(root, "c")}
	for _, d := range []string{e.daemonDir, e.configDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	e.writeOfflineMesh()
	return e
}

// offlineBroker is a broker URL nothing answers on.
const offlineBroker = "ws://127.0.0.1:1/ws"

// writeOfflineMesh records a `local` membership whose broker never
// answers: the daemon keeps retrying the connection and accepted rows stay
// pending, which is what the tests of the accept path, the outbox and the
// lifecycle look at. Delivery tests join a real broker instead.
func (e *env) writeOfflineMesh() {
	m, err := config.NewMembership(config.LocalMeshSlug, offlineBroker)
	if err == nil {
		_, err = config.Paths{ConfigDir: e.configDir}.AddMembership(m)
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// file is the path of name inside the daemon directory.
func (e *env) file(name string) string { return filepath.Join(e.daemonDir, name) }

func (e *env) socket() string { return e.file("daemon.sock") }

// environ is our environment with the two claudemesh directories replaced,
// and e.extra.
func (e *env) environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CLAUDEMESH_") {
			out = append(out, kv)
		}
	}
	return append(append(out, "CLAUDEMESH_DAEMON_DIR="+e.daemonDir, "CLAUDEMESH_CONFIG_DIR="+e.configDir), e.extra...)
}

// exists reports whether name exists in the daemon directory.
func (e *env) exists(name string) bool {
	_, err := os.Lstat(e.file(name))
	return err == nil
}

// syncBuffer is a bytes.Buffer safe for a writer goroutine and readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// daemonProc is a `claudemesh daemon up --foreground` child process.
type daemonProc struct {
	t       *testing.T
	env     *env
	cmd     *exec.Cmd
	stderr  *syncBuffer
	started time.Time
	done    chan struct{} // closed when the process has exited and been reaped
	waitErr error
}

// spawnDaemon starts a foreground daemon without waiting for it. With no
// args it listens on TCP 127.0.0.1:0 as well as the socket.
func spawnDaemon(t *testing.T, e *env, args ...string) *daemonProc {
	t.Helper()
	if len(args) == 0 {
		args = []string{"--tcp", "127.0.0.1:0"}
	}
	bin := binPath
	if e.bin != "" {
		bin = e.bin
	}
	cmd := exec.Command(bin, append([]string{"daemon", "up", "--foreground"}, args...)...)
	cmd.Env = e.environ()
	d := &daemonProc{t: t, env: e, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = d.stderr
	cmd.Stdout = d.stderr
	d.started = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start daemon: %v", err)
	}
	go func() {
		d.waitErr = cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		if !d.exited() {
			_ = cmd.Process.Kill()
			<-d.done
		}
	})
	return d
}

// startDaemon starts a foreground daemon and waits until it answers
// GET /v1/version on the socket with its own pid.
func startDaemon(t *testing.T, e *env, args ...string) *daemonProc {
	t.Helper()
	d := spawnDaemon(t, e, args...)
	d.waitReady()
	return d
}

func (d *daemonProc) pid() int { return d.cmd.Process.Pid }

func (d *daemonProc) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// exitCode is the exit status of an exited process (-1 for a signal).
func (d *daemonProc) exitCode() int {
	<-d.done
	return d.cmd.ProcessState.ExitCode()
}

// waitReady polls GET /v1/version over the socket until the answer carries
// this process's pid.
func (d *daemonProc) waitReady() {
	d.t.Helper()
	c := unixClient(d.env.socket())
	defer c.CloseIdleConnections()
	if err := wait.Until(startDeadline, fmt.Sprintf("daemon pid %d to answer on %s", d.pid(), d.env.socket()), func() bool {
		var v struct {
			PID int `json:"pid"`
		}
		if st, _, err := getJSON(c, "http://localhost/v1/version", &v); err == nil && st == 200 && v.PID == d.pid() {
			return true
		}
		select {
		case <-d.done:
			d.t.Fatalf("daemon exited during start-up (%v); stderr:\n%s", d.waitErr, d.stderr)
		default:
		}
		return false
	}); err != nil {
		d.t.Fatalf("%v; stderr:\n%s", err, d.stderr)
	}
}

// waitExit waits for the process to exit, failing the test after the deadline.
func (d *daemonProc) waitExit(within time.Duration) {
	d.t.Helper()
	select {
	case <-d.done:
	case <-time.After(within):
		d.t.Fatalf("daemon pid %d still running after %s; stderr:\n%s", d.pid(), within, d.stderr)
	}
}

// stop sends SIGTERM, asserts exit 0 and that the socket, pid file and
// http.port were removed.
func (d *daemonProc) stop() {
	d.t.Helper()
	d.stopWith(syscall.SIGTERM)
}

// stopWith is stop with another signal (SIGINT).
func (d *daemonProc) stopWith(sig syscall.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatalf("%v: %v", sig, err)
	}
	d.waitExit(stopDeadline)
	if code := d.exitCode(); code != 0 {
		d.t.Fatalf("daemon exited %d after %v, want 0; stderr:\n%s", code, sig, d.stderr)
	}
	if !strings.Contains(d.stderr.String(), `"msg":"daemon_shutdown"`) {
		d.t.Errorf("no daemon_shutdown log after %v:\n%s", sig, d.stderr)
	}
	for _, f := range []string{"daemon.sock", "daemon.pid", "http.port"} {
		if d.env.exists(f) {
			d.t.Errorf("%s still exists after a clean stop", f)
		}
	}
}

// kill9 sends SIGKILL and waits for the process to be reaped.
func (d *daemonProc) kill9() {
	d.t.Helper()
	if err := d.cmd.Process.Kill(); err != nil {
		d.t.Fatalf("SIGKILL: %v", err)
	}
	d.waitExit(stopDeadline)
}

// startCLILines starts a long-running `claudemesh <args>` (a follower) and
// hands the lines of its stdout to the channel, closed when the output
// ends; the process is killed at the test's end.
func startCLILines(t *testing.T, e *env, args ...string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = e.environ()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return cmd, lines
}

// openOutbox opens outbox.db of a stopped daemon; the handle is closed at
// the end of the test at the latest (close it before starting a daemon).
func openOutbox(t *testing.T, e *env) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.file("outbox.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// execSQL runs statements against outbox.db of a stopped daemon and closes it.
func execSQL(t *testing.T, e *env, stmts ...string) {
	t.Helper()
	db := openOutbox(t, e)
	defer db.Close()
	for _, s := range stmts {
		res, err := db.Exec(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if n, _ := res.RowsAffected(); n == 0 && !strings.HasPrefix(s, "DROP ") {
			t.Fatalf("%s: changed no row", s)
		}
	}
}

// cliResult is one finished CLI run.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs the claudemesh CLI with e's directories and waits for it.
func runCLI(t *testing.T, e *env, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = e.environ()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("claudemesh %s: %v", strings.Join(args, " "), err)
	}
	if ctx.Err() != nil {
		t.Fatalf("claudemesh %s: still running after %s", strings.Join(args, " "), cliDeadline)
	}
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// readTrimmed reads a daemon-directory file, trimmed.
func readTrimmed(t *testing.T, e *env, name string) string {
	t.Helper()
	b, err := os.ReadFile(e.file(name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// readPort reads http.port.
func readPort(t *testing.T, e *env) int {
	t.Helper()
	p, err := strconv.Atoi(readTrimmed(t, e, "http.port"))
	if err != nil || p <= 0 || p > 65535 {
		t.Fatalf("http.port holds %q", readTrimmed(t, e, "http.port"))
	}
	return p
}

// processGone reports whether pid no longer runs (absent, or a zombie
// waiting for a parent that is not us).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}

// str reads a string field of a decoded JSON object.
func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}
