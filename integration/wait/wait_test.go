package wait

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestUntilReturnsOnceTheConditionHolds: no error, and no check after the
// one that held.
func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	checks := 0
	if err := Until(10*time.Second, "the third check", func() bool { checks++; return checks == 3 }); err != nil {
		t.Fatal(err)
	}
	if checks != 3 {
		t.Fatalf("%d checks, want 3", checks)
	}
}

// TestUntilTimesOut: a condition that never holds gives, after the
// deadline and not before, an error naming what and how long.
func TestUntilTimesOut(t *testing.T) {
	start := time.Now()
	err := Until(30*time.Millisecond, "the moon", func() bool { return false })
	if waited := time.Since(start); waited < 30*time.Millisecond {
		t.Fatalf("gave up after %s, before the deadline", waited)
	}
	if err == nil || !strings.HasPrefix(err.Error(), "the moon: not within 30ms (waited ") {
		t.Fatalf("error %v", err)
	}
}

// TestUntilEveryPausesBetweenChecks: with a pause of its own, a condition
// is checked no more often than that.
func TestUntilEveryPausesBetweenChecks(t *testing.T) {
	var checks []time.Time
	if err := UntilEvery(10*time.Second, 20*time.Millisecond, "the third check", func() bool {
		checks = append(checks, time.Now())
		return len(checks) == 3
	}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(checks); i++ {
		if gap := checks[i].Sub(checks[i-1]); gap < 20*time.Millisecond {
			t.Errorf("checks %d and %d %s apart, want at least 20ms", i-1, i, gap)
		}
	}
}

// fatalRecorder is a testing.TB whose Fatal records instead of ending
// the test.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (r *fatalRecorder) Helper()           {}
func (r *fatalRecorder) Fatal(args ...any) { r.fatal = fmt.Sprint(args...) }

// TestForFailsTheTest: For fails its TB with Until's error, and leaves it
// alone when the condition holds.
func TestForFailsTheTest(t *testing.T) {
	r := &fatalRecorder{TB: t}
	For(r, time.Second, "a held condition", func() bool { return true })
	if r.fatal != "" {
		t.Fatalf("a held condition failed the test: %s", r.fatal)
	}
	For(r, 20*time.Millisecond, "the moon", func() bool { return false })
	if !strings.HasPrefix(r.fatal, "the moon: not within 20ms") {
		t.Fatalf("Fatal got %q", r.fatal)
	}
}
