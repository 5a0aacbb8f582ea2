package wsclient

import (
	"sync"
	"time"
)

// Breaker states, as /v1/health reports them.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half_open"
)

// Breaker parameters.
const (
	BreakerThreshold = 5                // consecutive failed connects that open it
	BreakerCooldown  = 30 * time.Second // between half-open probes
)

// Breaker is the per-mesh connect circuit breaker. Closed: every attempt is
// allowed. After BreakerThreshold consecutive failures it opens: attempts
// are refused until BreakerCooldown has passed, then one half-open probe is
// allowed (and another every BreakerCooldown while the probe has not
// reported). A success closes it; a failed probe opens it again for a full
// cooldown. Safe for concurrent use.
type Breaker struct {
	now func() time.Time

	mu       sync.Mutex
	state    string
	failures int
	since    time.Time // when it opened, or when the last probe was allowed
}

// NewBreaker returns a closed breaker reading the clock now (nil: time.Now).
func NewBreaker(now func() time.Time) *Breaker {
	if now == nil {
		now = time.Now
	}
	return &Breaker{now: now, state: BreakerClosed}
}

// Allow reports whether a connect may be attempted now; in the open state
// after the cooldown it moves to half_open and allows the probe.
func (b *Breaker) Allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case BreakerClosed:
		return true
	default: // open, or half_open with a probe outstanding
		if b.now().Sub(b.since) < BreakerCooldown {
			return false
		}
		b.state, b.since = BreakerHalfOpen, b.now()
		return true
	}
}

// RetryIn is how long until Allow would allow an attempt (0: now).
func (b *Breaker) RetryIn() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == BreakerClosed {
		return 0
	}
	return max(0, BreakerCooldown-b.now().Sub(b.since))
}

// Success records a successful connect: the breaker closes.
func (b *Breaker) Success() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state, b.failures = BreakerClosed, 0
}

// Failure records a failed connect.
func (b *Breaker) Failure() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	switch {
	case b.state == BreakerHalfOpen, b.state == BreakerOpen:
		b.state, b.since = BreakerOpen, b.now()
	case b.failures >= BreakerThreshold:
		b.state, b.since = BreakerOpen, b.now()
	}
}

// State is closed, open or half_open.
func (b *Breaker) State() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Failures is the number of consecutive failed connects.
func (b *Breaker) Failures() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures
}
