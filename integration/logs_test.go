package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// TestDetachedLogIsJSONLines: a detached daemon appends one JSON object per
// line to daemon.log, with [log] limits from config.toml.
func TestDetachedLogIsJSONLines(t *testing.T) {
	e := newEnv(t)
	writeConfigTOML(t, e, "[log]\nmax_size_mb = 1\nmax_age_days = 1\n")
	const earlier = `{"time":"2024-01-01T00:00:00Z","level":"INFO","msg":"from an earlier run"}` + "\n"
	if err := os.WriteFile(e.file("daemon.log"), []byte(earlier), 0o600); err != nil {
		t.Fatal(err)
	}
	pid := startDetached(t, e, "--no-tcp")
	c := unixClient(e.socket())
	for i := 0; i < 5; i++ {
		mustSend(t, c, "*", "logged", fmt.Sprintf("log-%d", i))
	}
	c.CloseIdleConnections()
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	wait.For(t, stopDeadline, "config_reloaded in daemon.log", func() bool {
		b, err := os.ReadFile(e.file("daemon.log"))
		return err == nil && len(logRecords(string(b), "config_reloaded")) == 1
	})
	if down := runCLI(t, e, "daemon", "down"); down.code != 0 {
		t.Fatalf("daemon down: exit %d\n%s", down.code, down.stderr)
	}
	wait.For(t, stopDeadline, "the daemon process to be gone", func() bool { return processGone(pid) })

	b, err := os.ReadFile(e.file("daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), earlier) {
		t.Errorf("daemon.log no longer starts with the earlier run's line:\n%s", b)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	msgs := map[string]int{}
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("daemon.log line %d is not JSON: %q", i+1, line)
			continue
		}
		msg, ok := m["msg"].(string)
		if !ok || str(m, "level") == "" || str(m, "time") == "" {
			t.Errorf("daemon.log line %d lacks msg, level or time: %q", i+1, line)
		}
		msgs[msg]++
	}
	for _, want := range []string{"daemon_started", "config_reloaded", "daemon_shutdown"} {
		if msgs[want] != 1 {
			t.Errorf("daemon.log has %d %s records, want 1:\n%s", msgs[want], want, b)
		}
	}
	if started := logRecords(string(b), "daemon_started"); len(started) == 1 && started[0]["pid"] != float64(pid) {
		t.Errorf("daemon_started pid %v, want %d", started[0]["pid"], pid)
	}
	matches, err := filepath.Glob(e.file("daemon.log.*"))
	if err != nil || len(matches) != 0 {
		t.Errorf("rotated logs %v (%v) with far less than 1 MiB written", matches, err)
	}
}
