package integration

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// TestDaemonDownAndStatus: down stops a detached daemon and is a no-op
// without one; status reports the daemon (text and JSON) or exits 1.
func TestDaemonDownAndStatus(t *testing.T) {
	e := newEnv(t)
	pid := startDetached(t, e, "--no-tcp")

	st := runCLI(t, e, "daemon", "status")
	if st.code != 0 {
		t.Fatalf("daemon status: exit %d\n%s%s", st.code, st.stdout, st.stderr)
	}
	if !strings.Contains(st.stdout, fmt.Sprintf("daemon: running, pid %d,", pid)) ||
		!regexp.MustCompile(`(?m)^MESH\s+MEMBER\s+CONNECTED\s+BREAKER\s+LAG\s+QUEUED\s+INFLIGHT\s+DEAD$`).MatchString(st.stdout) ||
		!regexp.MustCompile(`(?m)^local\s+[0-9a-f]{16}…\s+no\s+(closed|open|half_open)\s+\d+ms\s+0\s+0\s+0$`).MatchString(st.stdout) {
		t.Errorf("daemon status printed:\n%s", st.stdout)
	}

	c := unixClient(e.socket())
	mustSend(t, c, "*", "queued for status", "st-1")
	c.CloseIdleConnections()
	js := runCLI(t, e, "daemon", "status", "--json")
	var rep struct {
		Running bool   `json:"running"`
		Socket  string `json:"socket"`
		Health  *struct {
			PID    int `json:"pid"`
			Meshes []struct {
				Mesh       string `json:"mesh"`
				QueueDepth int    `json:"queue_depth"`
			} `json:"meshes"`
		} `json:"health"`
	}
	if js.code != 0 || json.Unmarshal([]byte(js.stdout), &rep) != nil {
		t.Fatalf("daemon status --json: exit %d\n%s%s", js.code, js.stdout, js.stderr)
	}
	if !rep.Running || rep.Health == nil || rep.Health.PID != pid || rep.Socket != e.socket() {
		t.Fatalf("daemon status --json: %s", js.stdout)
	}
	if len(rep.Health.Meshes) != 1 || rep.Health.Meshes[0].Mesh != "local" || rep.Health.Meshes[0].QueueDepth != 1 {
		t.Errorf("daemon status --json meshes: %s", js.stdout)
	}

	down := runCLI(t, e, "daemon", "down")
	if down.code != 0 || down.stdout != fmt.Sprintf("daemon stopped (pid %d)\n", pid) {
		t.Fatalf("daemon down: exit %d\nstdout:\n%s\nstderr:\n%s", down.code, down.stdout, down.stderr)
	}
	wait.For(t, stopDeadline, "the daemon process to be gone", func() bool { return processGone(pid) })
	for _, f := range []string{"daemon.sock", "daemon.pid", "http.port"} {
		if e.exists(f) {
			t.Errorf("%s still exists after daemon down", f)
		}
	}
	if again := runCLI(t, e, "daemon", "down"); again.code != 0 || again.stdout != "daemon not running\n" {
		t.Errorf("second daemon down: exit %d\nstdout:\n%s\nstderr:\n%s", again.code, again.stdout, again.stderr)
	}

	st = runCLI(t, e, "daemon", "status")
	if st.code != 1 || !strings.Contains(st.stderr, "daemon not running") || st.stdout != "" {
		t.Errorf("daemon status without a daemon: exit %d\nstdout:\n%s\nstderr:\n%s", st.code, st.stdout, st.stderr)
	}
	if m := runCLI(t, e, "daemon", "metrics"); m.code != 1 || !strings.Contains(m.stderr, "daemon not running") || m.stdout != "" {
		t.Errorf("daemon metrics without a daemon: exit %d\nstdout:\n%s\nstderr:\n%s", m.code, m.stdout, m.stderr)
	}
	js = runCLI(t, e, "daemon", "status", "--json")
	var off map[string]any
	if js.code != 1 || json.Unmarshal([]byte(js.stdout), &off) != nil || off["running"] != false || off["health"] != nil {
		t.Errorf("daemon status --json without a daemon: exit %d\nstdout:\n%s\nstderr:\n%s", js.code, js.stdout, js.stderr)
	}
}

// rowState reads one outbox row of a stopped daemon.
func rowState(t *testing.T, e *env, clientID string) (status string, attempts int, next int64) {
	t.Helper()
	db := openOutbox(t, e)
	defer db.Close()
	if err := db.QueryRow(`SELECT status, attempts, next_attempt_at FROM outbox WHERE client_message_id = ?`, clientID).
		Scan(&status, &attempts, &next); err != nil {
		t.Fatalf("row %s: %v", clientID, err)
	}
	return status, attempts, next
}

// TestSIGTERMReleasesInflightWithoutAttempt: a graceful stop returns
// inflight rows to pending without counting an attempt; a SIGKILL leaves
// them for crash recovery, which counts one.
func TestSIGTERMReleasesInflightWithoutAttempt(t *testing.T) {
	e := newEnv(t)
	d := startSettled(t, e, "--no-tcp")
	c := unixClient(e.socket())
	mustSend(t, c, "*", "will be inflight", "rel-1")
	mustSend(t, c, "*", "stays pending", "rel-2")
	c.CloseIdleConnections()
	// The daemon runs: the update goes through SQLite's locking (busy_timeout).
	execSQL(t, e, `UPDATE outbox SET status = 'inflight', attempts = 3 WHERE client_message_id = 'rel-1'`)

	before := time.Now().UnixMilli()
	d.stop()
	after := time.Now().UnixMilli()
	if status, attempts, next := rowState(t, e, "rel-1"); status != "pending" || attempts != 3 || next < before || next > after {
		t.Errorf("rel-1 after SIGTERM: %s attempts %d next_attempt_at %d, want pending 3 in [%d, %d]", status, attempts, next, before, after)
	}
	if status, attempts, _ := rowState(t, e, "rel-2"); status != "pending" || attempts != 0 {
		t.Errorf("rel-2 after SIGTERM: %s attempts %d, want pending 0", status, attempts)
	}
	if recs := logRecords(d.stderr.String(), "outbox_inflight_released"); len(recs) != 1 || recs[0]["rows"] != float64(1) {
		t.Errorf("outbox_inflight_released records %v, want one with rows 1", recs)
	}

	// SIGKILL instead: the next start recovers the row and counts the attempt.
	d = startDaemon(t, e, "--no-tcp")
	if recs := logRecords(d.stderr.String(), "outbox_inflight_recovered"); len(recs) != 0 {
		t.Errorf("a start after a clean stop recovered rows: %v", recs)
	}
	execSQL(t, e, `UPDATE outbox SET status = 'inflight', attempts = 3 WHERE client_message_id = 'rel-1'`)
	d.kill9()
	d = startSettled(t, e, "--no-tcp")
	c = unixClient(e.socket())
	rows := byClientID(listAll(t, c, ""))
	c.CloseIdleConnections()
	if r := rows["rel-1"]; r.Status != "pending" || r.Attempts != 4 {
		t.Errorf("rel-1 after SIGKILL and restart: %s attempts %d, want pending 4", r.Status, r.Attempts)
	}
	if r := rows["rel-2"]; r.Status != "pending" || r.Attempts != 0 {
		t.Errorf("rel-2 after SIGKILL and restart: %s attempts %d, want pending 0", r.Status, r.Attempts)
	}
	if recs := logRecords(d.stderr.String(), "outbox_inflight_recovered"); len(recs) != 1 || recs[0]["rows"] != float64(1) {
		t.Errorf("outbox_inflight_recovered records %v, want one with rows 1", recs)
	}
	d.stop()
}

// TestGracefulStopUnderLoadWithin5s: SIGTERM during 16 concurrent senders
// ends the daemon with exit 0 within 5 s, and every 202 is kept.
func TestGracefulStopUnderLoadWithin5s(t *testing.T) {
	e := newEnv(t)
	d := startDaemon(t, e, "--no-tcp")
	var took time.Duration
	got202, requests := acceptStream(t, e, "gs", 16, 200, func() {
		start := time.Now()
		d.stop()
		took = time.Since(start)
	})
	if took > 5*time.Second {
		t.Errorf("graceful stop under load took %s, want under 5s", took)
	}
	t.Logf("graceful stop took %s", took)

	restartAndCheckStream(t, e, got202, requests)
}
