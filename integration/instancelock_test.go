package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestInstanceLockSurvivesMovedPidAndSocket: `rm daemon.pid; mv
// daemon.sock x; claudemesh daemon up` does not start a second daemon on
// the same databases: it exits 1 naming the running one, which keeps
// working, keeps its http.port, and stops cleanly.
func TestInstanceLockSurvivesMovedPidAndSocket(t *testing.T) {
	e := newEnv(t)
	pid := startDetached(t, e, "--tcp", "127.0.0.1:0")
	port := readTrimmed(t, e, "daemon.pid")
	if port != strconv.Itoa(pid) {
		t.Fatalf("daemon.pid holds %q, want %d", port, pid)
	}
	port = readTrimmed(t, e, "http.port")
	moved := e.file("x")
	if err := os.Remove(e.file("daemon.pid")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(e.socket(), moved); err != nil {
		t.Fatal(err)
	}

	second := runCLI(t, e, "daemon", "up", "--tcp", "127.0.0.1:0")
	if second.code != 1 || !strings.Contains(second.stderr, "daemon already running (pid "+strconv.Itoa(pid)+")") {
		t.Errorf("daemon up beside a daemon whose pid file and socket were moved: exit %d\nstdout:\n%s\nstderr:\n%s",
			second.code, second.stdout, second.stderr)
		if m := startedRe.FindStringSubmatch(second.stdout); m != nil {
			if other, _ := strconv.Atoi(m[1]); other > 0 {
				syscall.Kill(other, syscall.SIGKILL)
			}
		}
	}
	if strings.Contains(second.stderr, "DeadLetter") {
		t.Errorf("the refusal prints actor noise:\n%s", second.stderr)
	}
	if processGone(pid) {
		t.Fatal("the running daemon died")
	}
	if got := readTrimmed(t, e, "http.port"); got != port {
		t.Errorf("http.port is %q after the refused start, want the running daemon's %s", got, port)
	}
	if e.exists("daemon.sock") {
		t.Error("the refused daemon left a socket behind")
	}
	c := unixClient(moved)
	mustSend(t, c, "*", "still served", "lock-1")
	c.CloseIdleConnections()

	if err := os.Rename(moved, e.socket()); err != nil {
		t.Fatal(err)
	}
	if down := runCLI(t, e, "daemon", "down"); down.code != 0 {
		t.Fatalf("daemon down: exit %d\n%s%s", down.code, down.stdout, down.stderr)
	}
	for _, f := range []string{"daemon.sock", "http.port"} {
		if e.exists(f) {
			t.Errorf("%s still exists after daemon down", f)
		}
	}
	if status, _, _ := rowState(t, e, "lock-1"); status != "pending" {
		t.Errorf("lock-1: %s, want pending", status)
	}
}

// TestMovedDaemonDirStopRemovesOnlyItsOwnFiles: a daemon whose directory
// was moved away while it ran, stopped after a new daemon started at the
// old path, removes its own files (in the moved directory) and none of the
// new daemon's.
func TestMovedDaemonDirStopRemovesOnlyItsOwnFiles(t *testing.T) {
	e := newEnv(t)
	old := startDaemon(t, e, "--tcp", "127.0.0.1:0")
	movedDir := e.daemonDir + "-moved"
	if err := os.Rename(e.daemonDir, movedDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(e.daemonDir, 0o700); err != nil {
		t.Fatal(err)
	}
	fresh := startDaemon(t, e, "--tcp", "127.0.0.1:0")
	port := readTrimmed(t, e, "http.port")

	if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	old.waitExit(stopDeadline)
	if code := old.exitCode(); code != 0 {
		t.Fatalf("the moved daemon exited %d; stderr:\n%s", code, old.stderr)
	}
	for _, f := range []string{"daemon.sock", "daemon.pid", "http.port"} {
		if !e.exists(f) {
			t.Errorf("%s of the running daemon was removed by the other daemon's stop", f)
		}
		if _, err := os.Lstat(filepath.Join(movedDir, f)); err == nil {
			t.Errorf("the moved daemon left its %s behind", f)
		}
	}
	if got := readTrimmed(t, e, "http.port"); got != port {
		t.Errorf("http.port %q, want %s", got, port)
	}
	fresh.waitReady()
	fresh.stop()
}
