package ratelimit

import (
	"context"
	"sync"
	"time"
)

// DefaultBurst is the upstream broker's bucket size (wire protocol §2.4).
const DefaultBurst = 10

// Bucket is the upstream broker's limiter, for the broker's legacy test
// mode (`broker up --legacy-protocol`): a token bucket per (mesh, sender)
// holding up to burst tokens and refilled at Limit per Window, in memory.
// Unlike Memory it is not idempotent (a retry pays again) and a refusal
// carries no retry-after (Decision.RetryAfter is zero): upstream's says
// "slow down" and nothing more. The bucket is per sender where upstream's
// is per member; a daemon's member connection is its own sender.
type Bucket struct {
	opts  Options
	burst float64
	rate  float64 // tokens per nanosecond

	mu      sync.Mutex
	closed  bool
	buckets map[bucketKey]*tokens
}

type bucketKey struct{ mesh, sender string }

type tokens struct {
	left float64
	at   time.Time
}

var _ Limiter = (*Bucket)(nil)

// NewBucket returns a token-bucket limiter of burst tokens (0 or less:
// DefaultBurst) refilled at opts.Limit per opts.Window.
func NewBucket(opts Options, burst int) *Bucket {
	opts = opts.normalized()
	if burst <= 0 {
		burst = DefaultBurst
	}
	return &Bucket{opts: opts, burst: float64(burst), rate: float64(opts.Limit) / float64(opts.Window),
		buckets: map[bucketKey]*tokens{}}
}

// Burst is the bucket size.
func (b *Bucket) Burst() int { return int(b.burst) }

// PerMinute is the refill rate in messages a minute (rounded down).
func (b *Bucket) PerMinute() int {
	return int(int64(b.opts.Limit) * int64(time.Minute) / int64(b.opts.Window))
}

// Consume implements Limiter: it takes a token of sender's bucket, if one
// is left. clientMessageID is checked, not remembered.
func (b *Bucket) Consume(ctx context.Context, meshID, sender, clientMessageID string) (Decision, error) {
	if err := validate(meshID, sender, clientMessageID); err != nil {
		return Decision{}, err
	}
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	now := b.opts.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return Decision{}, ErrClosed
	}
	k := bucketKey{meshID, sender}
	t := b.buckets[k]
	if t == nil {
		b.forgetFull(now)
		t = &tokens{left: b.burst, at: now}
		b.buckets[k] = t
	}
	t.left = b.refilled(t, now)
	t.at = now
	if t.left < 1 {
		return Decision{}, nil
	}
	t.left--
	return Decision{Allowed: true}, nil
}

// refilled is t's tokens at now (a clock that steps back refills nothing).
func (b *Bucket) refilled(t *tokens, now time.Time) float64 {
	return min(b.burst, t.left+b.rate*float64(max(now.Sub(t.at), 0)))
}

// forgetFull drops the buckets that have refilled, once there are many: a
// full bucket is the same as none, so memory stays bounded by the senders
// that sent within the last burst/rate.
func (b *Bucket) forgetFull(now time.Time) {
	if len(b.buckets) < 1024 {
		return
	}
	for k, t := range b.buckets {
		if b.refilled(t, now) >= b.burst {
			delete(b.buckets, k)
		}
	}
}

// Close drops all state; later Consume calls return ErrClosed.
func (b *Bucket) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed, b.buckets = true, nil
	return nil
}
