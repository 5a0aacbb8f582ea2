package wsclient

import (
	"math/rand/v2"
	"time"
)

// Reconnect schedule (ARCHITECTURE A14).
const (
	BackoffInitial = 500 * time.Millisecond
	BackoffMax     = 30 * time.Second
	BackoffJitter  = 0.25
)

// Backoff is the reconnect schedule of A14: 500 ms, doubling per attempt,
// capped at 30 s, each delay jittered by ±25 %, with no attempt cap. The
// jitter is applied to the capped delay and the result is capped again, so
// no delay exceeds 30 s. Reset after a successful connect. Not safe for
// concurrent use (one actor owns it).
type Backoff struct {
	rand    func() float64
	attempt int
}

// NewBackoff returns a Backoff whose jitter draws from rnd, a source of
// uniform values in [0, 1); nil uses math/rand/v2.
func NewBackoff(rnd func() float64) *Backoff {
	if rnd == nil {
		rnd = rand.Float64
	}
	return &Backoff{rand: rnd}
}

// Next returns the delay before the next attempt and counts the attempt.
func (b *Backoff) Next() time.Duration {
	base := BackoffInitial
	for i := 0; i < b.attempt && base < BackoffMax; i++ {
		base *= 2
	}
	base = min(base, BackoffMax)
	b.attempt++
	factor := 1 + BackoffJitter*(2*b.rand()-1) // [0.75, 1.25)
	return min(time.Duration(float64(base)*factor), BackoffMax)
}

// Attempt is the number of delays handed out since the last Reset.
func (b *Backoff) Attempt() int { return b.attempt }

// Reset starts the schedule over (after a successful connect).
func (b *Backoff) Reset() { b.attempt = 0 }
