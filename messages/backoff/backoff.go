// Package backoff is claudemesh's one retry schedule: a first delay,
// doubled per attempt up to a cap, then spread by a random jitter. Every
// retry loop takes its waits from it, with its own numbers: the broker
// reconnect and the send pacer's pauses (transport/wsclient), the outbox
// retry (persistence), the hook outbox retry (actors), the MCP server's
// event-stream reconnect and the join request (transport/join).
//
// It lives under messages, the bottom layer, because persistence computes
// the outbox's next_attempt_at from it and persistence imports neither
// transport nor actors; like messages/fifo it imports nothing of claudemesh
// and does no I/O. It is ours rather than protoactor's strategy (whose
// "exponential" backoff grows linearly and jitters by nanoseconds) or a
// library's stateful timer: the outbox needs the wait as a pure function of
// a row's attempt count, with a random source a test can inject.
package backoff

import (
	"math"
	"time"
)

// Schedule is a retry schedule: First before the first retry, each further
// wait twice the one before, at most Max, then multiplied by a factor
// drawn from [1-Jitter, 1+Jitter). A Schedule is a value: the attempt
// count is the caller's (a row's attempts, a loop's counter, a Sequence).
type Schedule struct {
	// First is the wait before the first retry.
	First time.Duration
	// Max caps the doubled wait; 0 means no cap.
	Max time.Duration
	// Jitter is the spread as a fraction of the wait (0.25: ±25 %); 0
	// gives the same waits every time.
	Jitter float64
	// JitterWithinMax caps the jittered wait at Max as well, so that no
	// wait exceeds Max: waits at the cap lie in [Max×(1-Jitter), Max].
	// Without it they lie in [Max×(1-Jitter), Max×(1+Jitter)), and
	// retries that reached the cap together drift apart.
	JitterWithinMax bool
}

// Delay is the wait before retry number attempt (1 is the first retry;
// values below 1 count as 1). rnd draws the jitter: a uniform value in
// [0, 1), as math/rand/v2.Float64 returns; nil means no jitter.
func (s Schedule) Delay(attempt int, rnd func() float64) time.Duration {
	limit := s.Max
	if limit <= 0 {
		limit = math.MaxInt64
	}
	d := s.First
	for i := 1; i < attempt && d < limit; i++ {
		if d > limit/2 {
			d = limit
		} else {
			d *= 2
		}
	}
	d = min(d, limit)
	if rnd == nil || s.Jitter == 0 {
		return d
	}
	d = time.Duration(float64(d) * (1 + s.Jitter*(2*rnd()-1)))
	if s.JitterWithinMax && s.Max > 0 {
		d = min(d, s.Max)
	}
	return d
}

// Sequence hands out a Schedule's waits one attempt after another: the
// shape of a reconnect loop, which counts its failures and starts over
// after a success. Not safe for concurrent use (one loop or actor owns it).
type Sequence struct {
	schedule Schedule
	rnd      func() float64
	attempt  int
}

// Sequence starts counting attempts of s; rnd is Delay's.
func (s Schedule) Sequence(rnd func() float64) *Sequence {
	return &Sequence{schedule: s, rnd: rnd}
}

// Next returns the wait before the next attempt and counts the attempt.
func (q *Sequence) Next() time.Duration {
	q.attempt++
	return q.schedule.Delay(q.attempt, q.rnd)
}

// Attempt is the number of waits handed out since the last Reset.
func (q *Sequence) Attempt() int { return q.attempt }

// Reset starts the schedule over (after a success).
func (q *Sequence) Reset() { q.attempt = 0 }
