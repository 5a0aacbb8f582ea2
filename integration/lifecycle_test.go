package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
)

// TestSingleInstance: two daemons started together on one directory leave
// exactly one running; the other exits 1 saying a daemon already runs.
func TestSingleInstance(t *testing.T) {
	e := newEnv(t)
	a := spawnDaemon(t, e, "--no-tcp")
	b := spawnDaemon(t, e, "--no-tcp")
	var winner, loser *daemonProc
	deadline := time.After(startDeadline)
	select {
	case <-a.done:
		winner, loser = b, a
	case <-b.done:
		winner, loser = a, b
	case <-deadline:
		t.Fatalf("neither daemon exited; stderr a:\n%s\nstderr b:\n%s", a.stderr, b.stderr)
	}
	if code := loser.exitCode(); code != 1 {
		t.Errorf("losing daemon exited %d, want 1; stderr:\n%s", code, loser.stderr)
	}
	if !strings.Contains(loser.stderr.String(), "daemon already running") {
		t.Errorf("losing daemon's stderr lacks 'daemon already running':\n%s", loser.stderr)
	}
	winner.waitReady()
	if winner.exited() {
		t.Fatalf("the winning daemon exited too; stderr:\n%s", winner.stderr)
	}
	if pid := readTrimmed(t, e, "daemon.pid"); pid != strconv.Itoa(winner.pid()) {
		t.Errorf("daemon.pid holds %q, want the running daemon's %d", pid, winner.pid())
	}
	// A third start while it runs is refused the same way, naming its pid.
	c := spawnDaemon(t, e, "--no-tcp")
	c.waitExit(startDeadline)
	if code := c.exitCode(); code != 1 || !strings.Contains(c.stderr.String(), "daemon already running (pid "+strconv.Itoa(winner.pid())+")") {
		t.Errorf("third daemon: exit %d, stderr:\n%s", code, c.stderr)
	}
	if winner.exited() {
		t.Fatalf("the running daemon exited after a refused start; stderr:\n%s", winner.stderr)
	}
	winner.stop()
}

// TestStalePidFileDoesNotBlock: a pid file naming a dead process, with no
// lock held, does not stop a daemon from starting.
func TestStalePidFileDoesNotBlock(t *testing.T) {
	e := newEnv(t)
	dead := exec.Command(binPath, "--version")
	if err := dead.Run(); err != nil {
		t.Fatalf("run a short-lived process: %v", err)
	}
	stale := strconv.Itoa(dead.Process.Pid)
	if err := os.WriteFile(e.file("daemon.pid"), []byte(stale+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, e, "--no-tcp")
	if pid := readTrimmed(t, e, "daemon.pid"); pid != strconv.Itoa(d.pid()) {
		t.Errorf("daemon.pid holds %q, want %d (stale was %s)", pid, d.pid(), stale)
	}
	d.stopWith(syscall.SIGINT) // SIGINT is as clean as SIGTERM
}

// TestKill9LeavesSocketNextStartWorks: SIGKILL leaves daemon.sock and
// daemon.pid behind; the next start replaces both.
func TestKill9LeavesSocketNextStartWorks(t *testing.T) {
	e := newEnv(t)
	d := startDaemon(t, e)
	c := unixClient(e.socket())
	mustSend(t, c, "*", "before the kill", "k9s-1")
	c.CloseIdleConnections()
	d.kill9()
	for _, f := range []string{"daemon.sock", "daemon.pid"} {
		if !e.exists(f) {
			t.Errorf("%s is gone after SIGKILL; the test expects it left behind", f)
		}
	}
	d2 := startDaemon(t, e)
	if d2.pid() == d.pid() {
		t.Fatal("same pid")
	}
	if pid := readTrimmed(t, e, "daemon.pid"); pid != strconv.Itoa(d2.pid()) {
		t.Errorf("daemon.pid holds %q, want %d", pid, d2.pid())
	}
	c = unixClient(e.socket())
	if rows := byClientID(listAll(t, c, "")); rows["k9s-1"].Status != "pending" || len(rows) != 1 {
		t.Errorf("rows after restart: %+v", rows)
	}
	c.CloseIdleConnections()
	d2.stop()
}

var startedRe = regexp.MustCompile(`(?m)^daemon started \(pid (\d+)\)$`)

// TestDetachedUp: `daemon up` without --foreground returns once the daemon
// answers; a second one is refused; SIGTERM ends the daemon and its files.
func TestDetachedUp(t *testing.T) {
	e := newEnv(t)
	pid := startDetached(t, e, "--tcp", "127.0.0.1:0")
	pidText := strconv.Itoa(pid)
	if processGone(pid) {
		t.Fatalf("pid %d is not running after daemon up", pid)
	}
	c := unixClient(e.socket())
	var v struct {
		PID int `json:"pid"`
	}
	if st, _, err := getJSON(c, "http://localhost/v1/version", &v); err != nil || st != 200 || v.PID != pid {
		t.Fatalf("GET /v1/version: status %d pid %d err %v, want pid %d", st, v.PID, err, pid)
	}
	c.CloseIdleConnections()
	if got := readTrimmed(t, e, "daemon.pid"); got != pidText {
		t.Errorf("daemon.pid holds %q, want %s", got, pidText)
	}
	readPort(t, e) // --tcp reached the detached daemon

	again := runCLI(t, e, "daemon", "up", "--tcp", "127.0.0.1:0")
	if again.code != 1 || !strings.Contains(again.stderr, "already running") || !strings.Contains(again.stderr, pidText) {
		t.Errorf("second daemon up: exit %d, stderr:\n%s", again.code, again.stderr)
	}
	if processGone(pid) {
		t.Fatal("the daemon died after a refused second up")
	}
	checkDaemonLogs(t, e)

	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wait.For(t, stopDeadline, "the detached daemon to exit and remove its files", func() bool {
		return processGone(pid) && !e.exists("daemon.sock") && !e.exists("daemon.pid") && !e.exists("http.port")
	})
	log, err := os.ReadFile(e.file("daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{`"msg":"daemon_started"`, `"msg":"daemon_shutdown"`} {
		if !strings.Contains(string(log), msg) {
			t.Errorf("daemon.log lacks %s:\n%s", msg, log)
		}
	}
}

type versionReport struct {
	CLIVersion string `json:"cli_version"`
	Protocol   string `json:"protocol"`
	Running    bool   `json:"running"`
	Daemon     *struct {
		DaemonVersion string `json:"daemon_version"`
		PID           int    `json:"pid"`
		IPCAPI        string `json:"ipc_api"`
		SchemaVersion int    `json:"schema_version"`
		Mesh          string `json:"mesh"`
		MemberPubkey  string `json:"member_pubkey"`
	} `json:"daemon"`
}

// TestDaemonVersionJSON: `daemon version --json` with and without a daemon.
func TestDaemonVersionJSON(t *testing.T) {
	e := newEnv(t)
	parse := func(res cliResult) versionReport {
		t.Helper()
		if res.code != 0 {
			t.Fatalf("daemon version --json: exit %d, stderr:\n%s", res.code, res.stderr)
		}
		var r versionReport
		if err := json.Unmarshal([]byte(res.stdout), &r); err != nil {
			t.Fatalf("daemon version --json printed %q: %v", res.stdout, err)
		}
		if r.CLIVersion == "" || r.Protocol == "" {
			t.Errorf("cli_version/protocol missing: %s", res.stdout)
		}
		return r
	}
	down := parse(runCLI(t, e, "daemon", "version", "--json"))
	if down.Running || down.Daemon != nil {
		t.Errorf("without a daemon: running %v daemon %+v, want false and null", down.Running, down.Daemon)
	}

	d := startDaemon(t, e, "--no-tcp")
	up := parse(runCLI(t, e, "daemon", "version", "--json"))
	if !up.Running || up.Daemon == nil {
		t.Fatalf("with a daemon: running %v daemon %+v", up.Running, up.Daemon)
	}
	if up.Daemon.PID != d.pid() {
		t.Errorf("daemon.pid %d, want %d", up.Daemon.PID, d.pid())
	}
	if up.Daemon.DaemonVersion != up.CLIVersion || up.Daemon.IPCAPI != "v1" || up.Daemon.SchemaVersion < 1 ||
		up.Daemon.Mesh != "local" || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(up.Daemon.MemberPubkey) {
		t.Errorf("daemon block %+v (cli %s)", *up.Daemon, up.CLIVersion)
	}
	text := runCLI(t, e, "daemon", "version")
	if text.code != 0 || !strings.Contains(text.stdout, "pid "+strconv.Itoa(d.pid())) {
		t.Errorf("daemon version: exit %d, stdout:\n%s", text.code, text.stdout)
	}
	d.stop()

	after := parse(runCLI(t, e, "daemon", "version", "--json"))
	if after.Running || after.Daemon != nil {
		t.Errorf("after stop: running %v daemon %+v", after.Running, after.Daemon)
	}
}

// checkDaemonLogs: `daemon logs` prints the detached daemon's daemon.log —
// readable records, as written with --json, filtered by --level — and with
// -f a record written after it started (a reload's).
func checkDaemonLogs(t *testing.T, e *env) {
	t.Helper()
	if r := runCLI(t, e, "daemon", "logs", "-n", "50"); r.code != 0 || !regexp.MustCompile(`(?m)^\S+ INFO  daemon_started version=`).MatchString(r.stdout) {
		t.Errorf("daemon logs: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, e, "daemon", "logs", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"msg":"daemon_started"`) {
		t.Errorf("daemon logs --json: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, e, "daemon", "logs", "--level", "error"); r.code != 0 || strings.Contains(r.stdout, "daemon_started") {
		t.Errorf("daemon logs --level error: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, e, "daemon", "logs", "-n", "-1"); r.code != 2 {
		t.Errorf("daemon logs -n -1: exit %d, want 2\nstderr %s", r.code, r.stderr)
	}
	_, lines := startCLILines(t, e, "daemon", "logs", "-f", "-n", "0")
	// The follower may start after the reload's record: reload until one
	// shows (each writes a new record).
	deadline := time.After(10 * time.Second)
	for {
		if r := runCLI(t, e, "daemon", "reload"); r.code != 0 {
			t.Fatalf("daemon reload: exit %d\n%s", r.code, r.stderr)
		}
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("daemon logs -f ended")
			}
			if strings.Contains(line, "config_reloaded") {
				return
			}
		case <-deadline:
			t.Fatal("daemon logs -f printed no config_reloaded within 10 s")
		case <-time.After(time.Second): // reload again
		}
	}
}

// TestDaemonVersionFeatures: `daemon version` names the broker features
// each connected mesh negotiated (it said "none" while the log listed
// three).
func TestDaemonVersionFeatures(t *testing.T) {
	e := localAgentsEnv(t) // the embedded broker's local mesh
	d := startDaemon(t, e, "--no-tcp")
	defer d.stop()
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	var v messages.Version
	wait.For(t, e2eConnectDeadline, "features in GET /v1/version", func() bool {
		st, _, err := getJSON(c, "http://localhost/v1/version", &v)
		return err == nil && st == http.StatusOK && len(v.BrokerFeaturesNegotiated) > 0
	})
	if !slices.Contains(v.BrokerFeaturesNegotiated, "client_message_id_dedupe") || len(v.Meshes) != 1 ||
		!slices.Equal(v.Meshes[0].BrokerFeatures, v.BrokerFeaturesNegotiated) {
		t.Fatalf("version: %+v", v)
	}
	text := runCLI(t, e, "daemon", "version")
	if text.code != 0 || !strings.Contains(text.stdout, "broker features negotiated: client_message_id_dedupe") ||
		!strings.Contains(text.stdout, "mesh local: member") {
		t.Errorf("daemon version: exit %d\n%s", text.code, text.stdout)
	}
}

// TestCleanShutdownWarnsOfNothing: a daemon on its embedded broker,
// stopped with SIGTERM, logs nothing at WARN or above after
// daemon_shutdown — six times over, since what it caught was a race:
// the embedded broker's connections wrote their close (their node
// offline) after the broker's database had closed ("database is closed",
// one run in two or three).
func TestCleanShutdownWarnsOfNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := os.Remove(filepath.Join(e.configDir, "config.json")); err != nil { // the default: the local mesh
		t.Fatal(err)
	}
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	for run := range 6 {
		d := startDaemon(t, e, "--no-tcp")
		wait.For(t, e2eConnectDeadline, "the local mesh on the embedded broker", func() bool { return meshConnected(c, "local") })
		c.CloseIdleConnections()
		d.stop()
		records := strings.Split(d.stderr.String(), "\n")
		for i := len(records) - 1; i >= 0; i-- {
			if strings.Contains(records[i], `"msg":"daemon_shutdown"`) {
				records = records[i:]
				break
			}
		}
		for _, r := range records {
			if strings.Contains(r, `"level":"WARN"`) || strings.Contains(r, `"level":"ERROR"`) {
				t.Errorf("run %d: after daemon_shutdown: %s", run, r)
			}
		}
	}
}
