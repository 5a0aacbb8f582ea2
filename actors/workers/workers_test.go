package workers

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBlockedMailboxHoldsUpOnlyItself: while one scheduled function blocks,
// the next still runs.
func TestBlockedMailboxHoldsUpOnlyItself(t *testing.T) {
	release, ran := make(chan struct{}), make(chan struct{})
	Pool.Schedule(func() { <-release })
	Pool.Schedule(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("a function scheduled after a blocked one did not run within 5 s")
	}
	close(release)
}

// TestEveryScheduleRunsOnce: functions scheduled from many goroutines at
// once each run exactly once.
func TestEveryScheduleRunsOnce(t *testing.T) {
	const n = 4000
	var runs [n]atomic.Int32
	var done sync.WaitGroup
	done.Add(n)
	var senders sync.WaitGroup
	for s := range 8 {
		senders.Add(1)
		go func() {
			defer senders.Done()
			for i := s; i < n; i += 8 {
				Pool.Schedule(func() { runs[i].Add(1); done.Done() })
			}
		}()
	}
	senders.Wait()
	done.Wait()
	for i := range runs {
		if r := runs[i].Load(); r != 1 {
			t.Fatalf("function %d ran %d times", i, r)
		}
	}
}

// TestGather: a wake runs step (at once with no delay), a wake during a
// long delay runs it only when stop ends the wait, and stop runs it once
// more before Gather returns. wake is unbuffered, so that Gather has taken
// the wake (and is waiting out the delay) before stop is closed.
func TestGather(t *testing.T) {
	for _, delay := range []time.Duration{0, time.Hour} {
		wake, stop, steps, done := make(chan struct{}), make(chan struct{}), make(chan struct{}, 4), make(chan struct{})
		go func() {
			defer close(done)
			Gather(wake, stop, delay, func() { steps <- struct{}{} })
		}()
		wake <- struct{}{}
		if delay == 0 {
			<-steps // the wake's own step
		}
		close(stop)
		<-done
		if n := len(steps); n != 1 {
			t.Fatalf("delay %v: %d steps after stop, want 1", delay, n)
		}
	}
}
