package integration

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// notifyListener listens on a unixgram socket for sd_notify datagrams and
// points NOTIFY_SOCKET at it for the daemons this test starts.
func notifyListener(t *testing.T) (*net.UnixConn, <-chan string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	ch := make(chan string, 16)
	go func() {
		defer close(ch)
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			ch <- string(buf[:n])
		}
	}()
	return conn, ch
}

// nextNotify waits for the next datagram.
func nextNotify(t *testing.T, ch <-chan string, d *daemonProc, what string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-d.done:
		// It may have been sent just before the exit.
		select {
		case s := <-ch:
			return s
		case <-time.After(time.Second):
		}
		t.Fatalf("daemon exited (%v) before %s; stderr:\n%s", d.waitErr, what, d.stderr)
	case <-time.After(startDeadline):
		t.Fatalf("no %s datagram within %s; stderr:\n%s", what, startDeadline, d.stderr)
	}
	return ""
}

// TestSdNotify: under NOTIFY_SOCKET the daemon sends READY=1 once it
// answers, STOPPING=1 on SIGTERM, and nothing when it fails to start.
func TestSdNotify(t *testing.T) {
	e := newEnv(t)
	_, ch := notifyListener(t)

	writeConfigTOML(t, e, "[clone]\npolicy = \"maybe\"\n")
	bad := spawnDaemon(t, e, "--no-tcp")
	bad.expectExit(2, "clone.policy")
	select {
	case s := <-ch:
		t.Fatalf("a daemon that failed to start sent %q", s)
	default:
	}
	if err := os.Remove(e.file("config.toml")); err != nil {
		t.Fatal(err)
	}

	d := spawnDaemon(t, e, "--no-tcp")
	if s := nextNotify(t, ch, d, "READY=1"); !slices.Contains(strings.Split(s, "\n"), "READY=1") {
		t.Fatalf("first datagram %q, want READY=1", s)
	}
	// READY=1 means it answers now: one request, no retry.
	c := unixClient(e.socket())
	var v struct {
		PID int `json:"pid"`
	}
	if st, _, err := getJSON(c, "http://localhost/v1/version", &v); err != nil || st != 200 || v.PID != d.pid() {
		t.Fatalf("GET /v1/version right after READY=1: %d pid %d err %v", st, v.PID, err)
	}
	c.CloseIdleConnections()
	d.settle()
	d.stop()
	if s := nextNotify(t, ch, d, "STOPPING=1"); !slices.Contains(strings.Split(s, "\n"), "STOPPING=1") {
		t.Fatalf("datagram after SIGTERM %q, want STOPPING=1", s)
	}
	select {
	case s := <-ch:
		t.Errorf("unexpected datagram %q after STOPPING=1", s)
	default:
	}
}
