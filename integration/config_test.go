package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
)

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
	// A --config that names no file is refused, not read as the defaults.
	missing := filepath.Join(t.TempDir(), "typo.toml")
	spawnDaemon(t, e, "--config", missing).expectExit(2, missing, "no such file")

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
	var body []byte
	if err := wait.Until(stopDeadline, "a deferred WAL sync in the metrics after the reload to batched_50ms", func() bool {
		resp, err := c.Get("http://localhost/v1/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return synced.Match(body)
	}); err != nil {
		t.Fatalf("%v:\n%s", err, body)
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
