package integration

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// benchReport is what `claudemesh bench --json` prints: the fields the
// tests read.
type benchReport struct {
	Mode       string  `json:"mode"`
	Sent       int     `json:"sent"`
	Delivered  int     `json:"delivered"`
	Throughput float64 `json:"throughput"`
	LatencyMs  struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
		Max float64 `json:"max"`
	} `json:"latency_ms"`
	Errors      map[string]int     `json:"errors"`
	Lost        int                `json:"lost"`
	Duplicates  int                `json:"duplicates"`
	Pending     int                `json:"pending"`
	RSSMB       float64            `json:"rss_mb"`
	CPUMsPerMsg map[string]float64 `json:"cpu_ms_per_msg"`
}

// benchJSON runs `claudemesh bench <args> --json` (self-contained runs
// need no environment of a test's) and returns its report.
func benchJSON(tb testing.TB, args ...string) benchReport {
	tb.Helper()
	cmd := exec.Command(binPath, append(append([]string{"bench"}, args...), "--json")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var rep benchReport
	if err := cmd.Run(); err != nil || json.Unmarshal(stdout.Bytes(), &rep) != nil {
		tb.Fatalf("claudemesh bench %s: %v\nstdout %s\nstderr %s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return rep
}

// TestBenchCLI: `claudemesh bench --json` in each mode, self-contained, and
// accept against a running daemon: every message sent is answered (and in
// e2e arrives exactly once), and the report has its figures.
func TestBenchCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	startDaemon(t, e, "--no-tcp")
	for _, c := range []struct {
		name string
		args []string
	}{
		{"accept on the running daemon", []string{"bench", "--count", "300", "--clients", "8", "--json"}},
		{"accept self-contained", []string{"bench", "--self-contained", "--count", "300", "--clients", "8", "--json"}},
		{"e2e self-contained", []string{"bench", "--mode", "e2e", "--self-contained", "--count", "300", "--clients", "8", "--json"}},
		{"e2e paced", []string{"bench", "--mode", "e2e", "--self-contained", "--count", "100", "--rate", "500", "--json"}},
		{"broker self-contained", []string{"bench", "--mode", "broker", "--self-contained", "--count", "300", "--clients", "8",
			"--connections", "4", "--json"}},
		{"startup", []string{"bench", "--mode", "startup", "--self-contained", "--count", "3", "--pending", "200", "--json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, e, c.args...)
			var rep benchReport
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rep) != nil {
				t.Fatalf("claudemesh %v: exit %d\nstdout %s\nstderr %s", c.args, r.code, r.stdout, r.stderr)
			}
			want := 300
			switch c.name {
			case "e2e paced":
				want = 100
			case "startup":
				want = 3
				if rep.Pending != 200 || rep.RSSMB <= 0 {
					t.Errorf("startup report %+v", rep)
				}
			}
			if rep.Sent != want || rep.Delivered != want || rep.Lost != 0 || rep.Duplicates != 0 || len(rep.Errors) != 0 ||
				rep.Throughput <= 0 || rep.LatencyMs.P50 <= 0 || rep.LatencyMs.Max < rep.LatencyMs.P99 {
				t.Fatalf("report %+v", rep)
			}
			var roles []string // whose CPU a self-contained run counts
			switch c.name {
			case "accept self-contained":
				roles = []string{"alice", "client"}
			case "e2e self-contained", "e2e paced":
				roles = []string{"broker", "alice", "bob", "client"}
			case "broker self-contained":
				roles = []string{"broker", "client"}
			}
			for _, role := range roles {
				if _, ok := rep.CPUMsPerMsg[role]; !ok {
					t.Errorf("cpu_ms_per_msg lacks %s: %v", role, rep.CPUMsPerMsg)
				}
			}
			if roles != nil && rep.CPUMsPerMsg["total"] <= 0 {
				t.Errorf("cpu_ms_per_msg total %v", rep.CPUMsPerMsg)
			}
			t.Logf("%s: %.0f msgs/s, p50 %.2f ms, p99 %.2f ms", c.name, rep.Throughput, rep.LatencyMs.P50, rep.LatencyMs.P99)
		})
	}
	if r := runCLI(t, e, "bench", "--mode", "e2e"); r.code != 2 {
		t.Errorf("e2e without --self-contained: exit %d, want 2\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, e, "bench", "--database-url", "postgres://x"); r.code != 2 {
		t.Errorf("--database-url without --self-contained: exit %d, want 2\n%s", r.code, r.stderr)
	}
}

// TestBenchAgainstRunning: e2e between two running daemons (the CLI's
// daemon sends, --receiver names the other's socket) and broker mode
// against the running broker as alice.
func TestBenchAgainstRunning(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	m.alice.start(t)
	m.bob.start(t)
	for _, args := range [][]string{
		{"bench", "--mode", "e2e", "--receiver", m.bob.env.socket(), "--to", m.bob.pubkey, "--count", "200", "--clients", "8", "--json"},
		{"bench", "--mode", "broker", "--count", "200", "--clients", "8", "--json"},
	} {
		r := runCLI(t, m.alice.env, args...)
		var rep benchReport
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rep) != nil {
			t.Fatalf("claudemesh %v: exit %d\nstdout %s\nstderr %s", args, r.code, r.stdout, r.stderr)
		}
		if rep.Sent != 200 || rep.Delivered != 200 || rep.Lost != 0 || rep.Duplicates != 0 || len(rep.Errors) != 0 {
			t.Fatalf("claudemesh %v: report %+v", args, rep)
		}
		t.Logf("%s against running processes: %.0f msgs/s, p50 %.2f ms", rep.Mode, rep.Throughput, rep.LatencyMs.P50)
	}
}
