package wsclient

import (
	"math/rand/v2"
	"time"

	"github.com/claudemesh/claudemesh-go/messages/backoff"
)

// Reconnect schedule (ARCHITECTURE A14).
const (
	BackoffInitial = 500 * time.Millisecond
	BackoffMax     = 30 * time.Second
	BackoffJitter  = 0.25
)

// reconnect is the reconnect schedule of A14: 500 ms, doubling per
// attempt, capped at 30 s, each delay jittered by ±25 %, with no attempt
// cap. The jitter is applied to the capped delay and the result is capped
// again, so no delay exceeds 30 s.
var reconnect = backoff.Schedule{First: BackoffInitial, Max: BackoffMax, Jitter: BackoffJitter, JitterWithinMax: true}

// Backoff counts the attempts of the reconnect schedule: Next returns the
// delay before the next one, Reset starts over after a successful connect.
// Not safe for concurrent use (one actor owns it).
type Backoff = backoff.Sequence

// NewBackoff returns a Backoff whose jitter draws from rnd, a source of
// uniform values in [0, 1); nil uses math/rand/v2.
func NewBackoff(rnd func() float64) *Backoff {
	if rnd == nil {
		rnd = rand.Float64
	}
	return reconnect.Sequence(rnd)
}
