package backoff

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

const (
	ms = time.Millisecond
	s  = time.Second
)

// bounds are the least and the greatest wait of one attempt over every
// jitter draw; hiOpen says the greatest is approached but never reached.
type bounds struct {
	lo, hi time.Duration
	hiOpen bool
}

// TestCallersSchedules: each caller's numbers, attempt by attempt, with
// the least and greatest wait its jitter allows.
func TestCallersSchedules(t *testing.T) {
	for _, tc := range []struct {
		name     string
		schedule Schedule
		want     []bounds // attempts 1, 2, …
	}{
		{"wsclient reconnect and pacer pause (A14: within the cap)",
			Schedule{First: 500 * ms, Max: 30 * s, Jitter: 0.25, JitterWithinMax: true}, []bounds{
				{375 * ms, 625 * ms, true}, {750 * ms, 1250 * ms, true}, {1500 * ms, 2500 * ms, true}, {3 * s, 5 * s, true},
				{6 * s, 10 * s, true}, {12 * s, 20 * s, true}, {22500 * ms, 30 * s, false}, {22500 * ms, 30 * s, false},
			}},
		{"persistence outbox retry (A14: spread around the cap)",
			Schedule{First: 500 * ms, Max: 30 * s, Jitter: 0.25}, []bounds{
				{375 * ms, 625 * ms, true}, {750 * ms, 1250 * ms, true}, {1500 * ms, 2500 * ms, true}, {3 * s, 5 * s, true},
				{6 * s, 10 * s, true}, {12 * s, 20 * s, true}, {22500 * ms, 37500 * ms, true}, {22500 * ms, 37500 * ms, true},
			}},
		{"actors hook retry", Schedule{First: s, Max: 60 * s}, []bounds{
			{s, s, false}, {2 * s, 2 * s, false}, {4 * s, 4 * s, false}, {8 * s, 8 * s, false},
			{16 * s, 16 * s, false}, {32 * s, 32 * s, false}, {60 * s, 60 * s, false}, {60 * s, 60 * s, false},
		}},
		{"MCP event-stream reconnect", Schedule{First: 250 * ms, Max: 5 * s}, []bounds{
			{250 * ms, 250 * ms, false}, {500 * ms, 500 * ms, false}, {s, s, false}, {2 * s, 2 * s, false},
			{4 * s, 4 * s, false}, {5 * s, 5 * s, false}, {5 * s, 5 * s, false},
		}},
		{"join request (no cap)", Schedule{First: 500 * ms}, []bounds{
			{500 * ms, 500 * ms, false}, {s, s, false}, {2 * s, 2 * s, false}, {4 * s, 4 * s, false},
			{8 * s, 8 * s, false}, {16 * s, 16 * s, false}, {32 * s, 32 * s, false}, {64 * s, 64 * s, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, b := range tc.want {
				checkAttempt(t, tc.schedule, i+1, b)
			}
		})
	}
}

// checkAttempt checks one attempt's waits against b: the least at a draw
// of 0, the greatest as the draw nears 1, random draws in between.
func checkAttempt(t *testing.T, sc Schedule, attempt int, b bounds) {
	t.Helper()
	draw := func(v float64) func() float64 { return func() float64 { return v } }
	if got := sc.Delay(attempt, draw(0)); got != b.lo {
		t.Errorf("attempt %d at draw 0: %v, want %v", attempt, got, b.lo)
	}
	top := sc.Delay(attempt, draw(1-1e-9))
	if b.hiOpen && (top >= b.hi || top < b.hi-b.hi/1000) || !b.hiOpen && top != b.hi {
		t.Errorf("attempt %d as the draw nears 1: %v, want up to %v (reached: %t)", attempt, top, b.hi, !b.hiOpen)
	}
	for range 1000 {
		if got := sc.Delay(attempt, rand.Float64); got < b.lo || got > b.hi {
			t.Fatalf("attempt %d at a random draw: %v, outside [%v, %v]", attempt, got, b.lo, b.hi)
		}
	}
	if nominal := sc.Delay(attempt, nil); nominal != sc.Delay(attempt, draw(0.5)) {
		t.Errorf("attempt %d: no jitter gives %v, the draw's midpoint %v", attempt, nominal, sc.Delay(attempt, draw(0.5)))
	}
}

// TestDelayAttemptRange: an attempt below 1 is the first retry, and a huge
// one is the cap — or, with no cap, the longest Duration, not an overflow.
func TestDelayAttemptRange(t *testing.T) {
	capped := Schedule{First: 500 * ms, Max: 30 * s}
	for _, a := range []int{math.MinInt, -3, 0, 1} {
		if got := capped.Delay(a, nil); got != 500*ms {
			t.Errorf("Delay(%d) = %v, want the first wait", a, got)
		}
	}
	if got := capped.Delay(math.MaxInt, nil); got != 30*s {
		t.Errorf("Delay(MaxInt) = %v, want the cap", got)
	}
	if got := (Schedule{First: 500 * ms}).Delay(math.MaxInt, nil); got != math.MaxInt64 {
		t.Errorf("uncapped Delay(MaxInt) = %v, want %v", got, time.Duration(math.MaxInt64))
	}
	if got := (Schedule{First: time.Minute, Max: 30 * s}).Delay(1, nil); got != 30*s {
		t.Errorf("a first wait above the cap: %v, want the cap", got)
	}
}

// TestSequence: Next counts attempts and walks the schedule; Reset starts
// it over.
func TestSequence(t *testing.T) {
	q := Schedule{First: 250 * ms, Max: 5 * s}.Sequence(nil)
	var got []time.Duration
	for range 7 {
		got = append(got, q.Next())
	}
	if want := []time.Duration{250 * ms, 500 * ms, s, 2 * s, 4 * s, 5 * s, 5 * s}; !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
	if q.Attempt() != 7 {
		t.Fatalf("Attempt() = %d after 7 waits", q.Attempt())
	}
	q.Reset()
	if q.Attempt() != 0 {
		t.Fatalf("Attempt() = %d after Reset", q.Attempt())
	}
	if got := q.Next(); got != 250*ms {
		t.Fatalf("the first wait after Reset is %v, want 250ms", got)
	}
}
