// Package sysmon keeps the Go runtime's system monitor awake in the
// commands whose work arrives as many short events a second with idle
// gaps between them: the daemon and the MCP server.
//
// The monitor (sysmon, a thread of every Go process) sleeps deeply once
// every P is idle, and the next system call wakes it, after which it polls
// every 20 µs until the process idles again. A daemon answering a message
// every millisecond idles between messages hundreds of times a second, and
// so do the MCP servers beside it; each time, their monitors wake, poll
// and sleep again, context switches that take the two cores of a small
// machine from the work (the MCP server spent 7.8 context switches a call,
// some 40 % of them its monitor's; 3.5 with the monitor awake). Told to trace the scheduler
// (GODEBUG=schedtrace=N), the monitor never sleeps deeply; it backs off to
// one look every 10 ms while nothing needs it instead. In alternated runs
// of BenchmarkMCPMailSend that took up to a third of the CPU a message off
// the daemon and 15-43 % off the MCP server (docs/BENCHMARKS.md, "Agent
// mail: messages").
//
// What it costs:
//   - An idle process wakes about 100 times a second instead of 8-16
//     (some 2 ms of CPU a second against 0.5).
//   - The trace it asks for is printed, one SCHED line on stderr, every
//     2^31-1 ms (24.8 days) of the machine's monotonic clock: so once at
//     start on a machine up for longer than that, and every 24.8 days
//     after.
//   - A fatal runtime error prints the scheduler's state beside its stack.
//   - The monitor also hands the P of a goroutine blocked in a system call
//     (an fsync) to waiting work, at its second look at that call: up to
//     20 ms later once it has backed off, where a monitor just woken looks
//     every 20 µs. That wait matters only when every P is in such a call;
//     the benchmarks' tails (p99, the sessions' p99.9) did not lengthen.
//     GOMAXPROCS above the core count would keep a P free, but cost the
//     daemon 13-35 % more CPU a message at one client (GOMAXPROCS=4, three
//     alternated pairs on 2 cores), so it is left at the default.
//
// The setting is read by the runtime at start only, so KeepAwake
// re-executes the command once with it (3-4 ms for claudemesh-mcp, 15 for
// claudemesh; a process started with it in its environment, as a detaching
// `daemon up` starts the daemon, is spared that). install claude-code
// registers the MCP server without it: a diagnostic setting has no place
// in the user's configuration. GODEBUG naming schedtrace already
// (schedtrace=0 opts out) is left as it is.
package sysmon

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Setting is the GODEBUG entry KeepAwake adds: the longest trace period
// the runtime takes, in milliseconds.
const Setting = "schedtrace=2147483647"

// KeepAwake re-executes the running command, same binary, arguments and
// environment, with Setting added to GODEBUG, unless GODEBUG names
// schedtrace already. It returns only when it did not re-execute: nil when
// nothing was to be done, else why the exec failed (the command then runs
// on as it is). Call it first, before the command opens anything.
//
// The binary is re-executed by its path (os.Executable), not through
// /proc/self/exe, whose name would become the process's (its comm: what
// top shows and pgrep and killall match).
func KeepAwake() error {
	env, ok := Environ()
	if !ok {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("keep the runtime's monitor awake: %w", err)
	}
	if err := syscall.Exec(exe, os.Args, env); err != nil {
		return fmt.Errorf("keep the runtime's monitor awake: re-execute %s: %w", exe, err)
	}
	return nil // not reached
}

// Environ is this process's environment with Setting added to GODEBUG,
// and true; or the environment as it is and false when GODEBUG names
// schedtrace already. A command started with it need not re-execute.
func Environ() ([]string, bool) {
	godebug, ok := withSetting(os.Getenv("GODEBUG"))
	if !ok {
		return os.Environ(), false
	}
	env := []string{"GODEBUG=" + godebug} // one GODEBUG: the runtime reads the first
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") {
			env = append(env, kv)
		}
	}
	return env, true
}

// withSetting is godebug with Setting added, and true; or godebug and
// false when it names schedtrace already.
func withSetting(godebug string) (string, bool) {
	for kv := range strings.SplitSeq(godebug, ",") {
		if k, _, _ := strings.Cut(strings.TrimSpace(kv), "="); k == "schedtrace" {
			return godebug, false
		}
	}
	if strings.TrimSpace(godebug) == "" {
		return Setting, true
	}
	return godebug + "," + Setting, true
}
