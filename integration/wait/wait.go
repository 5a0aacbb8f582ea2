// Package wait is how claudemesh's tests wait for what happens on its own
// time — a row a timer writes, a process that exits, a peer that connects —
// without sleeping for a guess: they poll a condition until it holds or a
// deadline passes, and the failure names what was awaited and for how long.
// Every package's tests use it (the actors', the broker's, the
// integration tests'); only _test.go files import it.
//
// The pause between two checks (Interval) is a poll, not synchronization:
// the condition decides, the deadline only bounds the wait. A loop that
// measures time, or that waits on a channel, needs no helper.
package wait

import (
	"fmt"
	"testing"
	"time"
)

// Interval is the pause between two checks of a condition: short enough
// that a test goes on soon after its condition holds, long enough that a
// condition that asks a daemon or runs the CLI does not take the machine.
const Interval = 10 * time.Millisecond

// For checks cond until it holds and fails tb (Fatal) when within has
// passed first, naming what it waited for and how long. tb is a *testing.T
// or a *testing.B; call For from the test's own goroutine (see Until).
func For(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	if err := Until(within, what, cond); err != nil {
		tb.Fatal(err)
	}
}

// Until checks cond every Interval until it holds (nil) or within has
// passed (an error naming what it waited for and how long). It needs no
// testing.TB: a goroutine other than the test's may call it, and a caller
// may add what it saw last to the error.
func Until(within time.Duration, what string, cond func() bool) error {
	return UntilEvery(within, Interval, what, cond)
}

// UntilEvery is Until with a pause of every between two checks, for a
// condition that costs (a listing of a thousand messages, a run of the
// CLI) and should not be asked a hundred times a second.
func UntilEvery(within, every time.Duration, what string, cond func() bool) error {
	start := time.Now()
	for !cond() {
		if waited := time.Since(start); waited > within {
			return fmt.Errorf("%s: not within %s (waited %s)", what, within, waited.Round(time.Millisecond))
		}
		time.Sleep(every)
	}
	return nil
}
