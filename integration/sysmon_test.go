package integration

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// awakeSetting is what cmd/internal/sysmon adds to GODEBUG.
const awakeSetting = "schedtrace=2147483647"

// TestMonitorAwake: the daemon and both MCP servers run with the runtime's
// monitor kept awake (awakeSetting in GODEBUG, by one re-execution that
// keeps the process: startDaemon checks the pid the daemon answers with),
// beside whatever GODEBUG said; GODEBUG naming schedtrace is left alone.
// So does the daemon `daemon up` detaches.
func TestMonitorAwake(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/<pid>/environ")
	}
	for _, c := range []struct {
		name, godebug, want string
	}{
		{"unset", "", awakeSetting},
		{"other settings", "madvdontneed=1", "madvdontneed=1," + awakeSetting},
		{"opted out", "schedtrace=0", "schedtrace=0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := localAgentsEnv(t)
			e.extra = append(e.extra, "GODEBUG="+c.godebug)
			d := startDaemon(t, e, "--no-tcp")
			if got := godebugOf(t, d.pid()); got != c.want {
				t.Errorf("daemon: GODEBUG %q, want %q", got, c.want)
			}
			wantComm(t, d.pid(), binPath)
			for _, lean := range []bool{false, true} {
				p := startMCP(t, e, fmt.Sprint("mon-", lean), mcpOptions{lean: lean})
				p.mustCall("list_peers", map[string]any{}, nil) // it serves after its re-execution
				if got := godebugOf(t, p.cmd.Process.Pid); got != c.want {
					t.Errorf("MCP server (lean %v): GODEBUG %q, want %q", lean, got, c.want)
				}
				wantComm(t, p.cmd.Process.Pid, p.cmd.Path)
			}
			d.stop()
			if s := d.stderr.String(); strings.Contains(s, "keep the runtime's monitor awake") {
				t.Errorf("daemon could not re-execute:\n%s", s)
			}
			// `daemon up` starts the detached daemon with it.
			pid := startDetached(t, e, "--no-tcp")
			if got := godebugOf(t, pid); got != c.want {
				t.Errorf("detached daemon: GODEBUG %q, want %q", got, c.want)
			}
			if down := runCLI(t, e, "daemon", "down"); down.code != 0 {
				t.Errorf("daemon down: exit %d %s", down.code, down.stderr)
			}
		})
	}
}

// wantComm: process pid's name (what top shows, pgrep and killall match)
// is its binary's, as before it re-executed itself.
func wantComm(t *testing.T, pid int, bin string) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Base(bin)
	if len(want) > 15 { // the kernel keeps 15 bytes
		want = want[:15]
	}
	if got := strings.TrimSpace(string(b)); got != want {
		t.Errorf("pid %d is named %q, want %q", pid, got, want)
	}
}

// godebugOf is the GODEBUG of process pid's environment ("" when unset).
func godebugOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("GODEBUG=")); ok {
			got = append(got, string(v))
		}
	}
	if len(got) > 1 {
		t.Fatalf("pid %d has %d GODEBUGs: %q", pid, len(got), got)
	}
	if len(got) == 0 {
		return ""
	}
	return got[0]
}

// namesSchedtrace says whether a GODEBUG value sets schedtrace.
func namesSchedtrace(godebug string) bool {
	for kv := range strings.SplitSeq(godebug, ",") {
		if k, _, _ := strings.Cut(strings.TrimSpace(kv), "="); k == "schedtrace" {
			return true
		}
	}
	return false
}

// keepMonitorAwake re-executes the test binary, same path, arguments and
// environment, with awakeSetting added to GODEBUG, when it is to run
// benchmarks and GODEBUG names no schedtrace; it returns only when it did
// not re-execute. The benchmarks' own clients (rawMCP, the IPC senders)
// then run as the daemon and the MCP servers they measure do: with the
// monitor asleep, the client of BenchmarkMCPMailSend spent 0.07–0.08 ms
// of CPU a message against 0.04–0.05, on the two cores the servers
// measured share. The tests run as they are started. GODEBUG=schedtrace=0
// measures every process of a benchmark with the monitor sleeping deeply.
func keepMonitorAwake() error {
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" || namesSchedtrace(os.Getenv("GODEBUG")) {
		return nil
	}
	godebug := awakeSetting
	if v := strings.TrimSpace(os.Getenv("GODEBUG")); v != "" {
		godebug = v + "," + awakeSetting
	}
	env := []string{"GODEBUG=" + godebug}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") {
			env = append(env, kv)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return syscall.Exec(exe, os.Args, env)
}
