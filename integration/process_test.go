package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// Helpers that drive a daemon process: its config.toml, its log records,
// signals and exits, a detached start.

// writeConfigTOML writes config.toml in the daemon directory.
func writeConfigTOML(t *testing.T, e *env, body string) {
	t.Helper()
	if err := os.WriteFile(e.file("config.toml"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// logRecords are the JSON log lines of out whose msg is msg (every line
// with a msg when msg is ""). Lines that are not JSON are skipped.
func logRecords(out, msg string) []map[string]any {
	var recs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if s, ok := m["msg"].(string); ok && (msg == "" || s == msg) {
			recs = append(recs, m)
		}
	}
	return recs
}

// waitLog waits until the daemon's stderr holds n records with msg and
// returns them.
func (d *daemonProc) waitLog(msg string, n int) []map[string]any {
	d.t.Helper()
	var recs []map[string]any
	if err := wait.Until(stopDeadline, fmt.Sprintf("%d %q records", n, msg), func() bool {
		if recs = logRecords(d.stderr.String(), msg); len(recs) >= n {
			return true
		}
		if d.exited() {
			d.t.Fatalf("daemon exited (%v) while waiting for %d %q records; stderr:\n%s", d.waitErr, n, msg, d.stderr)
		}
		return false
	}); err != nil {
		d.t.Fatalf("%v: %d of them; stderr:\n%s", err, len(recs), d.stderr)
	}
	return recs
}

// settle waits for the daemon_started record, so that the tests that read
// the log find it before the records they provoke.
func (d *daemonProc) settle() {
	d.t.Helper()
	d.waitLog("daemon_started", 1)
}

// startSettled is startDaemon followed by settle.
func startSettled(t *testing.T, e *env, args ...string) *daemonProc {
	t.Helper()
	d := startDaemon(t, e, args...)
	d.settle()
	return d
}

// signal sends sig to the daemon.
func (d *daemonProc) signal(sig syscall.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatalf("%v: %v", sig, err)
	}
}

// expectExit waits for a daemon that must fail to start and checks its exit
// code and that its output holds every string in want.
func (d *daemonProc) expectExit(code int, want ...string) {
	d.t.Helper()
	d.waitExit(startDeadline)
	if got := d.exitCode(); got != code {
		d.t.Fatalf("daemon exited %d, want %d; stderr:\n%s", got, code, d.stderr)
	}
	for _, w := range want {
		if !strings.Contains(d.stderr.String(), w) {
			d.t.Errorf("exit %d output lacks %q:\n%s", code, w, d.stderr)
		}
	}
}

// startDetached runs `daemon up` (detached) and returns the pid it printed;
// the daemon is killed at the end of the test if it still runs.
func startDetached(t *testing.T, e *env, args ...string) int {
	t.Helper()
	res := runCLI(t, e, append([]string{"daemon", "up"}, args...)...)
	if res.code != 0 {
		t.Fatalf("daemon up: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	m := startedRe.FindStringSubmatch(res.stdout)
	if m == nil {
		t.Fatalf("daemon up printed no 'daemon started (pid N)':\n%s", res.stdout)
	}
	pid, _ := strconv.Atoi(m[1])
	t.Cleanup(func() {
		if !processGone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}
