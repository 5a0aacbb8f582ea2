package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

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
