// Package ratelimit owns the broker's idempotent per-mesh rate limiter: the
// external authority consulted in phase B1 (spec §4.8, §4.9.5, ARCHITECTURE
// §5). Budget is consumed at most once per (mesh_id, sender, client_message_id,
// window_bucket): a retry of a send whose id already paid in the current
// window passes free, even when the mesh's budget is exhausted, so a daemon
// retry during a saturated window is never turned into a permanent 4xx. A
// client_message_id belongs to its sender (the key the broker stamps as the
// message's sender, as in the broker's dedupe table): another sender's
// message with the same id is another message, and pays.
//
// Two implementations share the Limiter interface and the same semantics:
//
//   - Memory: one broker node (the default). A mutex-guarded map.
//   - Redis: `broker up --redis-url`. One Lua script, run with EVALSHA (one
//     round trip per Consume), loaded with SCRIPT LOAD at start; every broker
//     replica pointed at the same Redis shares one budget per mesh.
//
// A third, Bucket, is the upstream broker's token bucket, for the broker's
// legacy test mode only: per sender, not idempotent, no retry-after.
//
// This package owns only the accept/deny decision and its counters. It does
// not own the dedupe fast path (B0, persistence/broker), metrics (the caller
// counts cm_broker_rate_limit_rejection_total and
// cm_broker_rate_limit_spent_on_rejected_total), nor any refund when
// B2 rejects after the limiter said ok (the spec says: no refund).
//
// Decisions the spec leaves open:
//   - Windows are fixed: bucket = floor(now / Window), now from Options.Now
//     (the broker's clock, not Redis's). Replicas sharing a Redis must keep
//     their clocks in sync (NTP); skew only matters within the skew of a
//     window boundary, where a replica may charge the neighbouring bucket.
//   - Defaults: DefaultLimit (6,000) messages per DefaultWindow (60 s) per
//     mesh: 100 a second sustained, the rate the daemon spec allows one IPC
//     caller, with the whole minute's budget available to a burst.
//     A zero or negative Options.Limit or Options.Window takes the default.
//     Every replica must run with the same Limit and Window.
//   - Decision.RetryAfter, on a deny, is the time until the current window
//     rolls over: in (0, Window].
//   - Redis keys are exactly the spec's, behind an optional Options.Prefix:
//     `<prefix>rl:<mesh>:<bucket>` (the counter; INCR, expiry 2×Window set when
//     the counter is created; DECR refunds a denied attempt) and
//     `<prefix>rli:<mesh>:<sender>:<cmid>:<bucket>` (the "already paid"
//     marker, SET with expiry 2×Window; the spec's key has no sender). Expiries are set in milliseconds (PEXPIRE / SET PX),
//     which equals the spec's EX for whole-second windows and also allows
//     sub-second windows. The two keys of one call live in different hash
//     slots, so the Redis variant needs a single Redis node (or a primary
//     with replicas), not Redis Cluster.
//   - Mesh IDs and senders must be non-empty and free of ':' (they are
//     ULIDs/UUIDs and hex keys), so the keys above are unambiguous;
//     client_message_id must be non-empty. Anything else is ErrInvalidID.
//   - Memory keeps the current and the previous bucket only; older buckets
//     are dropped as windows roll, so it holds at most 2 × Σ(Limit per mesh)
//     paid ids. A clock that steps back by more than one window is charged
//     against the newest bucket the limiter has seen.
//   - An error from Consume (Redis unreachable, context done) carries a zero
//     Decision; the broker must answer it as a transient failure (5xx, the
//     daemon retries), never as a permanent rejection.
package ratelimit

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Defaults the broker uses: 6,000 messages per 60 s per mesh.
const (
	DefaultLimit  = 6000
	DefaultWindow = 60 * time.Second
)

// Errors.
var (
	// ErrClosed is returned by Consume after Close.
	ErrClosed = errors.New("ratelimit: limiter closed")
	// ErrInvalidID is returned for an empty mesh ID or sender, one
	// containing ':', or an empty client_message_id.
	ErrInvalidID = errors.New("ratelimit: invalid mesh_id, sender or client_message_id")
)

// Limiter is the broker's B1 rate-limit authority.
type Limiter interface {
	// Consume charges one message of sender's clientMessageID against meshID's budget in the
	// current window. A second call with the same sender and id in the same window is free
	// and allowed.
	Consume(ctx context.Context, meshID, sender, clientMessageID string) (Decision, error)
	Close() error
}

// Decision is the outcome of one Consume.
type Decision struct {
	Allowed bool
	// RetryAfter is the time until the window rolls, when denied; zero when
	// allowed.
	RetryAfter time.Duration
}

// Options configures a limiter. The zero value means DefaultLimit per
// DefaultWindow, the wall clock and no key prefix.
type Options struct {
	// Limit is the number of messages per window per mesh.
	Limit int
	// Window is the fixed window length.
	Window time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Prefix is prepended to every Redis key (e.g. "cm:" to share a Redis
	// with other users, or a per-test prefix). Memory ignores it.
	Prefix string
}

func (o Options) normalized() Options {
	if o.Limit <= 0 {
		o.Limit = DefaultLimit
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

func validate(meshID, sender, clientMessageID string) error {
	if meshID == "" || sender == "" || clientMessageID == "" ||
		strings.IndexByte(meshID, ':') >= 0 || strings.IndexByte(sender, ':') >= 0 {
		return ErrInvalidID
	}
	return nil
}

// bucketOf returns floor(now / window) and the time until that bucket ends.
func bucketOf(now time.Time, window time.Duration) (bucket int64, remaining time.Duration) {
	ns, w := now.UnixNano(), int64(window)
	bucket = ns / w
	if ns%w < 0 {
		bucket--
	}
	return bucket, time.Duration((bucket+1)*w - ns)
}
