package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

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
	deadline := time.Now().Add(stopDeadline)
	for {
		if recs = logRecords(d.stderr.String(), msg); len(recs) >= n {
			return recs
		}
		if d.exited() {
			d.t.Fatalf("daemon exited (%v) while waiting for %d %q records; stderr:\n%s", d.waitErr, n, msg, d.stderr)
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%d %q records after %s, want %d; stderr:\n%s", len(recs), msg, stopDeadline, n, d.stderr)
		}
		time.Sleep(pollInterval) // poll interval: the condition is re-checked
	}
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

// readHostFile decodes host_fingerprint.json.
func readHostFile(t *testing.T, e *env) map[string]any {
	t.Helper()
	var h map[string]any
	if err := json.Unmarshal([]byte(readTrimmed(t, e, "host_fingerprint.json")), &h); err != nil {
		t.Fatalf("host_fingerprint.json: %v", err)
	}
	return h
}

// recordOtherHost rewrites host_fingerprint.json as if the daemon directory
// had been set up on another machine.
func recordOtherHost(t *testing.T, e *env, h map[string]any) {
	t.Helper()
	other := make(map[string]any, len(h))
	for k, v := range h {
		other[k] = v
	}
	other["host_id"] = "linux:0123456789abcdef0123456789abcdef"
	other["fingerprint"] = strings.Repeat("ab", 32)
	other["stable_mac"] = "02:00:00:00:00:01"
	b, err := json.MarshalIndent(other, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.file("host_fingerprint.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestHostMismatchAndAcceptHost: a daemon directory recorded on another host
// refuses to start (exit 4, naming accept-host) until accept-host; clone
// policies warn and allow start anyway without accepting the host; an
// unreadable host file is a mismatch too.
func TestHostMismatchAndAcceptHost(t *testing.T) {
	e := newEnv(t)
	startSettled(t, e, "--no-tcp").stop()
	if !e.exists("host_fingerprint.json") {
		t.Fatal("the first start did not write host_fingerprint.json")
	}
	mine := readHostFile(t, e)
	if mine["schema_version"] != float64(2) || str(mine, "fingerprint") == "" {
		t.Fatalf("host_fingerprint.json: %v", mine)
	}

	recordOtherHost(t, e, mine)
	refused := func(what string) {
		t.Helper()
		d := spawnDaemon(t, e, "--no-tcp")
		t.Logf("start refused: %s", what)
		d.expectExit(4, "host fingerprint mismatch", "claudemesh daemon accept-host")
		for _, f := range []string{"daemon.sock", "daemon.pid"} {
			if e.exists(f) {
				t.Errorf("%s: %s left behind by a refused start", what, f)
			}
		}
	}
	refused("other host")
	if h := readHostFile(t, e); str(h, "host_id") == str(mine, "host_id") {
		t.Fatal("a refused start rewrote host_fingerprint.json")
	}
	// The detaching up passes the child's exit code on, and the child's
	// daemon.log stays JSON lines.
	if res := runCLI(t, e, "daemon", "up", "--no-tcp"); res.code != 4 || !strings.Contains(res.stderr, "accept-host") {
		t.Errorf("detached up on another host: exit %d, want 4 naming accept-host\nstderr:\n%s", res.code, res.stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(readTrimmed(t, e, "daemon.log")), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("daemon.log line is not JSON: %q", line)
		}
	}

	res := runCLI(t, e, "daemon", "accept-host")
	if res.code != 0 || !strings.Contains(res.stdout, "recorded host") {
		t.Fatalf("accept-host: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	if h := readHostFile(t, e); str(h, "host_id") != str(mine, "host_id") || str(h, "fingerprint") != str(mine, "fingerprint") {
		t.Errorf("after accept-host the file records %v, want this host %v", h, mine)
	}
	startSettled(t, e, "--no-tcp").stop()

	// warn and allow start on a mismatch, log it, and do not accept the host.
	recordOtherHost(t, e, mine)
	for _, c := range []struct{ policy, level string }{{"warn", "WARN"}, {"allow", "INFO"}} {
		writeConfigTOML(t, e, "[clone]\npolicy = \""+c.policy+"\"\n")
		d := startSettled(t, e, "--no-tcp")
		recs := logRecords(d.stderr.String(), "host_fingerprint_mismatch")
		if len(recs) != 1 || str(recs[0], "level") != c.level || str(recs[0], "policy") != c.policy {
			t.Errorf("policy %s: host_fingerprint_mismatch records %v, want one at %s", c.policy, recs, c.level)
		}
		d.stop()
	}
	writeConfigTOML(t, e, "[clone]\npolicy = \"refuse\"\n")
	refused("other host after starts under warn and allow")

	// A file that cannot be read as a host record is a mismatch.
	for name, body := range map[string]string{
		"garbage":          "\x00\x01 this is not json {",
		"empty":            "",
		"schema version 1": fmt.Sprintf(`{"schema_version":1,"fingerprint":%q,"host_id":%q}`, str(mine, "fingerprint"), str(mine, "host_id")),
	} {
		if err := os.WriteFile(e.file("host_fingerprint.json"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		refused(name)
	}
	if res := runCLI(t, e, "daemon", "accept-host"); res.code != 0 {
		t.Fatalf("accept-host over a garbage file: exit %d\n%s", res.code, res.stderr)
	}
	startSettled(t, e, "--no-tcp").stop()
}

// TestBadConfigTOML: an invalid config.toml stops both the foreground and
// the detaching `daemon up` with exit 2 naming the key, before anything
// detaches; --config names another file, for the detached daemon too.
func TestBadConfigTOML(t *testing.T) {
	e := newEnv(t)
	writeConfigTOML(t, e, "[daemon]\nlog_level = \"loud\"\n")
	spawnDaemon(t, e).expectExit(2, "daemon.log_level", e.file("config.toml"))

	res := runCLI(t, e, "daemon", "up", "--no-tcp")
	if res.code != 2 || !strings.Contains(res.stderr, "daemon.log_level") || !strings.Contains(res.stderr, e.file("config.toml")) {
		t.Errorf("detached up with a bad config.toml: exit %d, want 2 naming the file and key\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	for _, f := range []string{"daemon.log", "daemon.sock", "daemon.pid"} {
		if e.exists(f) {
			t.Errorf("%s exists: the detaching up started a daemon before validating", f)
		}
	}

	writeConfigTOML(t, e, "[ipc]\nhtp_port = 1\n")
	spawnDaemon(t, e, "--no-tcp").expectExit(2, "ipc.htp_port")

	// --config: a bad other.toml fails although config.toml is now valid ...
	writeConfigTOML(t, e, "[daemon]\nlog_level = \"info\"\n")
	other := filepath.Join(t.TempDir(), "other.toml")
	if err := os.WriteFile(other, []byte("[ipc]\nhttp_bind = \"0.0.0.0\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spawnDaemon(t, e, "--config", other).expectExit(2, other, "ipc.http_bind")

	// ... and a good one starts although config.toml is bad.
	writeConfigTOML(t, e, "[daemon]\nlog_level = \"loud\"\n")
	if err := os.WriteFile(other, []byte("[ipc]\ntcp_enabled = true\nhttp_port = 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startSettled(t, e, "--config", other)
	readPort(t, e) // TCP on port 0 came from other.toml
	d.signal(syscall.SIGHUP)
	if rec := d.waitLog("config_reloaded", 1)[0]; str(rec, "file") != other {
		t.Errorf("SIGHUP re-read %q, want %s", str(rec, "file"), other)
	}
	d.stop()

	// The detached daemon gets --config too.
	pid := startDetached(t, e, "--config", other, "--no-tcp")
	if down := runCLI(t, e, "daemon", "down"); down.code != 0 || !strings.Contains(down.stdout, fmt.Sprintf("daemon stopped (pid %d)", pid)) {
		t.Errorf("daemon down: exit %d\nstdout:\n%s\nstderr:\n%s", down.code, down.stdout, down.stderr)
	}
}

// TestSIGHUPReload: SIGHUP applies a new log level, keeps the old settings
// when the file is invalid, and reports [ipc] and [clone] changes as needing
// a restart.
func TestSIGHUPReload(t *testing.T) {
	e := newEnv(t)
	cfg := e.file("config.toml")
	writeConfigTOML(t, e, "[daemon]\nlog_level = \"info\"\n[ipc]\ntcp_enabled = true\nhttp_port = 0\n")
	// --config is the default path; passing it keeps startDaemon from adding --tcp,
	// which would override [ipc] at every reload.
	d := startSettled(t, e, "--config", cfg)
	port := readPort(t, e)
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	mustSend(t, c, "*", "at info", "hup-1")
	if recs := logRecords(d.stderr.String(), "batch committed"); len(recs) != 0 {
		t.Fatalf("debug records at log_level info: %v", recs)
	}

	writeConfigTOML(t, e, "[daemon]\nlog_level = \"debug\"\n[ipc]\ntcp_enabled = true\nhttp_port = 0\n")
	d.signal(syscall.SIGHUP)
	rec := d.waitLog("config_reloaded", 1)[0]
	if str(rec, "log_level") != "debug" || str(rec, "file") != cfg {
		t.Errorf("config_reloaded %v, want log_level debug and file %s", rec, cfg)
	}
	if r, _ := rec["restart_required_for"].([]any); len(r) != 0 {
		t.Errorf("a log level change reported restart_required_for %v", r)
	}
	mustSend(t, c, "*", "at debug", "hup-2")
	d.waitLog("batch committed", 1) // the new level is in force

	writeConfigTOML(t, e, "[daemon]\nlog_level = \"loud\"\n")
	d.signal(syscall.SIGHUP)
	failed := d.waitLog("config_reload_failed", 1)[0]
	if msg := str(failed, "err"); !strings.Contains(msg, "daemon.log_level") || !strings.Contains(msg, cfg) {
		t.Errorf("config_reload_failed err %q, want the file and daemon.log_level", msg)
	}
	var v struct {
		PID int `json:"pid"`
	}
	if st, _, err := getJSON(c, "http://localhost/v1/version", &v); err != nil || st != 200 || v.PID != d.pid() {
		t.Fatalf("after a failed reload: GET /v1/version %d pid %d err %v", st, v.PID, err)
	}
	mustSend(t, c, "*", "still debug", "hup-3")
	d.waitLog("batch committed", 2) // the old level stayed

	writeConfigTOML(t, e, "[daemon]\nlog_level = \"debug\"\n[ipc]\ntcp_enabled = true\nhttp_port = 1\n")
	d.signal(syscall.SIGHUP)
	rec = d.waitLog("config_reloaded", 2)[1]
	if r := rec["restart_required_for"]; fmt.Sprint(r) != "[ipc]" {
		t.Errorf("after an http_port change restart_required_for is %v, want [ipc]", r)
	}
	// The same file again: still differs from what runs.
	d.signal(syscall.SIGHUP)
	if r := d.waitLog("config_reloaded", 3)[2]["restart_required_for"]; fmt.Sprint(r) != "[ipc]" {
		t.Errorf("a second reload of the same change reports %v, want [ipc] (compare with the running config)", r)
	}
	// The listener does not move until a restart.
	if got := readPort(t, e); got != port {
		t.Errorf("http.port changed from %d to %d on reload", port, got)
	}
	req := newRequest(t, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/v1/version", port), nil)
	req.Header.Set("Authorization", "Bearer "+readTrimmed(t, e, "local-token"))
	tc := tcpClient()
	defer tc.CloseIdleConnections()
	if r := do(t, tc, req); r.status != 200 {
		t.Errorf("TCP on the old port after reload: %d %s", r.status, r.body)
	}

	writeConfigTOML(t, e, "[daemon]\nlog_level = \"debug\"\n[ipc]\ntcp_enabled = true\nhttp_port = 1\n[clone]\npolicy = \"warn\"\n")
	d.signal(syscall.SIGHUP)
	rec = d.waitLog("config_reloaded", 4)[3]
	r, _ := rec["restart_required_for"].([]any)
	if !slices.Contains(r, any("clone")) {
		t.Errorf("after a clone.policy change restart_required_for is %v, want it to hold clone", r)
	}

	// [outbox] fsync_mode applies at once: the next accept commits without
	// an fsync and the WAL sync follows (cm_daemon_store_commit_seconds).
	writeConfigTOML(t, e, "[daemon]\nlog_level = \"debug\"\n[ipc]\ntcp_enabled = true\nhttp_port = 1\n[clone]\npolicy = \"warn\"\n"+
		"[outbox]\nfsync_mode = \"batched_50ms\"\n")
	d.signal(syscall.SIGHUP)
	rec = d.waitLog("config_reloaded", 5)[4]
	if r, _ := rec["restart_required_for"].([]any); str(rec, "fsync_mode") != "batched_50ms" || slices.Contains(r, any("outbox")) {
		t.Errorf("after an fsync_mode change config_reloaded is %v, want fsync_mode batched_50ms and no restart for it", rec)
	}
	var hb messages.Health
	if st, _, err := getJSON(c, "http://localhost/v1/health", &hb); err != nil || st != 200 || hb.FsyncMode != "batched_50ms" {
		t.Errorf("GET /v1/health after the reload: %d %v fsync_mode %q", st, err, hb.FsyncMode)
	}
	if st := runCLI(t, e, "daemon", "status"); !strings.Contains(st.stdout, "outbox fsync_mode: batched_50ms") {
		t.Errorf("daemon status does not show the fsync mode:\n%s", st.stdout)
	}
	mustSend(t, c, "*", "batched", "hup-4")
	synced := regexp.MustCompile(`cm_daemon_store_commit_seconds_count\{db="outbox",durability="wal_sync"\} [1-9]`)
	deadline := time.Now().Add(stopDeadline)
	for {
		resp, err := c.Get("http://localhost/v1/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if synced.Match(body) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no deferred WAL sync in the metrics after the reload to batched_50ms:\n%s", body)
		}
		time.Sleep(pollInterval) // poll interval: the condition is re-checked
	}
	// `claudemesh daemon reload` does the same and says how it went.
	writeConfigTOML(t, e, "[daemon]\nlog_level = \"loud\"\n")
	if r := runCLI(t, e, "daemon", "reload"); r.code != 1 || !strings.Contains(r.stderr, "kept its settings") ||
		!strings.Contains(r.stderr, "daemon.log_level") {
		t.Errorf("daemon reload of a bad file: exit %d\n%s", r.code, r.stderr)
	}
	writeConfigTOML(t, e, "[daemon]\nlog_level = \"info\"\n[ipc]\ntcp_enabled = true\nhttp_port = 1\n")
	if r := runCLI(t, e, "daemon", "reload"); r.code != 0 || !strings.HasPrefix(r.stdout, "reloaded (pid ") {
		t.Errorf("daemon reload: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if d.exited() {
		t.Fatal("the daemon exited during the reloads")
	}
	d.stop()
}

// TestTCPOffInContainersAndCI: with a CI signal in its environment and no
// [ipc] tcp_enabled in config.toml, the daemon serves only its socket and
// says why; tcp_enabled = true (or --tcp) turns TCP back on.
func TestTCPOffInContainersAndCI(t *testing.T) {
	e := newEnv(t)
	e.extra = append(e.extra, "CI=true")
	writeConfigTOML(t, e, "[ipc]\nhttp_port = 0\n")
	d := startSettled(t, e, "--config", e.file("config.toml"))
	rec := d.waitLog("tcp_off_by_default", 1)[0]
	if !strings.Contains(str(rec, "because"), "CI=true") {
		t.Errorf("tcp_off_by_default says %v, want the CI signal", rec)
	}
	if e.exists("http.port") {
		t.Error("http.port written although TCP is off")
	}
	d.stop()

	writeConfigTOML(t, e, "[ipc]\ntcp_enabled = true\nhttp_port = 0\n")
	d = startSettled(t, e, "--config", e.file("config.toml"))
	readPort(t, e)
	if recs := logRecords(d.stderr.String(), "tcp_off_by_default"); len(recs) != 0 {
		t.Errorf("tcp_off_by_default with tcp_enabled = true: %v", recs)
	}
	d.stop()
	writeConfigTOML(t, e, "") // silent again: the flag turns it on too
	d = startSettled(t, e, "--tcp", "127.0.0.1:0")
	readPort(t, e)
	d.stop()
	t.Log("checked: under CI=true TCP is off unless config.toml or --tcp asks for it")
}

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
	waitFor(t, stopDeadline, "the daemon process to be gone", func() bool { return processGone(pid) })
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

// TestPublicHealthAndOriginAllowlist: [ipc] public_health_check opens GET
// /v1/health (only) to TCP callers without the token; origin_allowlist lets
// listed Origins through the gate, never past the token; the defaults do
// neither.
func TestPublicHealthAndOriginAllowlist(t *testing.T) {
	e := newEnv(t)
	writeConfigTOML(t, e, "[ipc]\npublic_health_check = true\norigin_allowlist = [\"http://localhost:3000\"]\n")
	d := startSettled(t, e) // --tcp 127.0.0.1:0
	base := fmt.Sprintf("http://127.0.0.1:%d", readPort(t, e))
	token := readTrimmed(t, e, "local-token")
	tc, uc := tcpClient(), unixClient(e.socket())
	defer tc.CloseIdleConnections()
	defer uc.CloseIdleConnections()

	type tcase struct {
		name          string
		client        *http.Client
		method, url   string
		origin, token string
		status        int
		code          string
	}
	run := func(cases []tcase) {
		t.Helper()
		for _, c := range cases {
			req := newRequest(t, c.method, c.url, nil)
			if c.origin != "" {
				req.Header.Set("Origin", c.origin)
			}
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			r := do(t, c.client, req)
			if r.status != c.status {
				t.Errorf("%s: status %d, want %d: %s", c.name, r.status, c.status, r.body)
				continue
			}
			if c.code != "" {
				if got := str(r.json(t), "error"); got != c.code {
					t.Errorf("%s: error %q, want %q: %s", c.name, got, c.code, r.body)
				}
			}
		}
	}
	run([]tcase{
		{name: "health without token", client: tc, method: "GET", url: base + "/v1/health", status: 200},
		{name: "version without token", client: tc, method: "GET", url: base + "/v1/version", status: 401, code: "unauthorized"},
		{name: "outbox without token", client: tc, method: "GET", url: base + "/v1/outbox", status: 401, code: "unauthorized"},
		{name: "POST health without token", client: tc, method: "POST", url: base + "/v1/health", status: 401, code: "unauthorized"},
		{name: "health with a bad token", client: tc, method: "GET", url: base + "/v1/health", token: "nope", status: 200},
		{name: "allowed origin with token", client: tc, method: "GET", url: base + "/v1/version", origin: "http://localhost:3000", token: token, status: 200},
		{name: "allowed origin, no token", client: tc, method: "GET", url: base + "/v1/version", origin: "http://localhost:3000", status: 401, code: "unauthorized"},
		{name: "other origin with token", client: tc, method: "GET", url: base + "/v1/version", origin: "http://localhost:3001", token: token, status: 403, code: "forbidden_origin"},
		{name: "other origin on public health", client: tc, method: "GET", url: base + "/v1/health", origin: "http://evil.example", status: 403, code: "forbidden_origin"},
		{name: "allowed origin on public health", client: tc, method: "GET", url: base + "/v1/health", origin: "http://localhost:3000", status: 200},
		{name: "allowed origin over the socket", client: uc, method: "GET", url: "http://localhost/v1/version", origin: "http://localhost:3000", status: 200},
		{name: "other origin over the socket", client: uc, method: "GET", url: "http://localhost/v1/version", origin: "https://localhost:3000", status: 403, code: "forbidden_origin"},
	})
	var h struct {
		OK  bool `json:"ok"`
		PID int  `json:"pid"`
	}
	if st, _, err := getJSON(tc, base+"/v1/health", &h); err != nil || st != 200 || !h.OK || h.PID != d.pid() {
		t.Errorf("public health: %d %+v %v", st, h, err)
	}
	tc.CloseIdleConnections()
	uc.CloseIdleConnections()
	d.stop()

	// The defaults: health needs the token and no Origin is allowed.
	if err := os.Remove(e.file("config.toml")); err != nil {
		t.Fatal(err)
	}
	d = startSettled(t, e)
	base = fmt.Sprintf("http://127.0.0.1:%d", readPort(t, e))
	run([]tcase{
		{name: "default: health without token", client: tc, method: "GET", url: base + "/v1/health", status: 401, code: "unauthorized"},
		{name: "default: health with token", client: tc, method: "GET", url: base + "/v1/health", token: token, status: 200},
		{name: "default: formerly allowed origin", client: tc, method: "GET", url: base + "/v1/version", origin: "http://localhost:3000", token: token, status: 403, code: "forbidden_origin"},
	})
	tc.CloseIdleConnections()
	d.stop()
}

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
	waitFor(t, stopDeadline, "config_reloaded in daemon.log", func() bool {
		b, err := os.ReadFile(e.file("daemon.log"))
		return err == nil && len(logRecords(string(b), "config_reloaded")) == 1
	})
	if down := runCLI(t, e, "daemon", "down"); down.code != 0 {
		t.Fatalf("daemon down: exit %d\n%s", down.code, down.stderr)
	}
	waitFor(t, stopDeadline, "the daemon process to be gone", func() bool { return processGone(pid) })

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
