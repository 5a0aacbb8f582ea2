package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// BenchmarkHookReceiver times the receiver as a hook runs it — a process
// started with the hook JSON on stdin, waited for — b.N times each, the
// variants taking turns so that they share the machine's load: the lean
// receiver (`claudemesh-hook PreToolUse`, what `hook install` writes) and
// `claudemesh hook PreToolUse`, with a daemon running, and the lean one
// with none; and three floors: `claudemesh --version` (the binary's
// start-up: its page faults and package inits, and kong's parser), a Go
// program that does nothing (testdata/gohello) and /bin/true (starting
// any process). Each reports p50 and p99 wall time in ms.
//
//	go test -run='^$' -bench=BenchmarkHookReceiver -benchtime=1000x ./integration/
func BenchmarkHookReceiver(b *testing.B) {
	e := benchHookEnv(b)
	hello := filepath.Join(b.TempDir(), "gohello")
	if out, err := exec.Command("go", "build", "-o", hello, "./testdata/gohello").CombinedOutput(); err != nil {
		b.Fatalf("build gohello: %v\n%s", err, out)
	}
	input := hookInput(b, "PreToolUse", "bench-receiver")
	variants := []struct {
		name string
		args []string
		in   []byte
	}{
		{"claudemesh_hook_lean", []string{hookBinPath, "PreToolUse"}, input},
		{"claudemesh_hook", []string{binPath, "hook", "PreToolUse"}, input},
		{"claudemesh_version", []string{binPath, "--version"}, nil},
		{"go_empty_main", []string{hello}, nil},
		{"bin_true", []string{"/bin/true"}, nil},
	}
	stop := benchDaemon(b, e)
	run := func(args []string, in []byte) time.Duration {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env, cmd.Stdin = e.environ(), bytes.NewReader(in)
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil || (len(out) > 0 && in != nil) {
			b.Fatalf("%v: %v %q", args, err, out)
		}
		return time.Since(start)
	}
	took := make([][]time.Duration, len(variants))
	b.ResetTimer()
	for range b.N {
		for i, v := range variants {
			took[i] = append(took[i], run(v.args, v.in))
		}
	}
	stop()
	var down []time.Duration // no daemon: the receiver alone with hooks.db
	for range b.N {
		down = append(down, run(variants[0].args, input))
	}
	b.StopTimer()
	for i, v := range variants {
		reportPercentiles(b, v.name, took[i])
	}
	reportPercentiles(b, "claudemesh_hook_lean_daemon_down", down)
	if n := len(hookRows(b, e)); n != 3*b.N {
		b.Fatalf("%d rows, want %d", n, 3*b.N)
	}
}

// reportPercentiles reports the p50 and p99 of d, in ms, under name.
func reportPercentiles(b *testing.B, name string, d []time.Duration) {
	slices.Sort(d)
	pct := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), name+"_p50_ms")
	b.ReportMetric(pct(0.99), name+"_p99_ms")
	fmt.Fprintf(os.Stderr, "%-28s p50 %6.2f ms  p99 %6.2f ms  (%d runs)\n", name, pct(0.50), pct(0.99), len(d))
}

// benchHookEnv is hookEnv for a benchmark: fresh directories, no mesh
// joined (the daemon makes a local one on its embedded broker).
func benchHookEnv(b *testing.B) *env {
	root, err := os.MkdirTemp("", "cmhb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(root) })
	e := &env{daemonDir: filepath.Join(root, "d"), configDir: filepath.Join(root, "c")}
	for _, d := range []string{e.daemonDir, e.configDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	return e
}

// benchDaemon starts a foreground daemon in e, waits until it answers, and
// returns its stop (SIGTERM, then wait).
func benchDaemon(b *testing.B, e *env) (stop func()) {
	cmd := exec.Command(binPath, "daemon", "up", "--foreground", "--no-tcp")
	cmd.Env = e.environ()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	if err := wait.Until(startDeadline, "the daemon to answer", func() bool {
		resp, err := c.Get("http://localhost/v1/version")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		b.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}
	}
	b.Cleanup(stop)
	return stop
}
