package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// consumeScript is spec §4.9.5's consume_budget, atomically on the server.
//
//	KEYS[1] = <prefix>rl:<mesh>:<bucket>          the mesh's counter
//	KEYS[2] = <prefix>rli:<mesh>:<sender>:<cmid>:<bucket>  "this sender's id already paid"
//	ARGV[1] = limit per window, ARGV[2] = expiry in ms (2 × window)
//
// Returns 1 (ok) or 0 (denied).
const consumeScript = `
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 1
end
local n = redis.call('INCR', KEYS[1])
if n == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if n > tonumber(ARGV[1]) then
  redis.call('DECR', KEYS[1])
  return 0
end
redis.call('SET', KEYS[2], 1, 'PX', ARGV[2])
return 1
`

var script = redis.NewScript(consumeScript)

// Redis is the limiter shared by every broker replica on one Redis.
type Redis struct {
	opts   Options
	client *redis.Client
	ttlMS  string
	closed atomic.Bool
}

var _ Limiter = (*Redis)(nil)

// NewRedis connects to url (redis://, rediss:// or unix://, as go-redis's
// ParseURL reads them), PINGs it and loads the script (SCRIPT LOAD).
func NewRedis(ctx context.Context, url string, opts Options) (*Redis, error) {
	opts = opts.normalized()
	if opts.Window < time.Millisecond {
		return nil, fmt.Errorf("ratelimit: window %v is shorter than 1ms", opts.Window)
	}
	ro, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: redis url: %w", err)
	}
	client := redis.NewClient(ro)
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("ratelimit: redis ping %s: %w", ro.Addr, err)
	}
	if err := script.Load(ctx, client).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("ratelimit: redis script load: %w", err)
	}
	return &Redis{
		opts:   opts,
		client: client,
		ttlMS:  strconv.FormatInt((2 * opts.Window).Milliseconds(), 10),
	}, nil
}

// Consume implements Limiter with one EVALSHA round trip (EVAL once more if
// the server lost the script, e.g. after a restart or SCRIPT FLUSH).
func (r *Redis) Consume(ctx context.Context, meshID, sender, clientMessageID string) (Decision, error) {
	if err := validate(meshID, sender, clientMessageID); err != nil {
		return Decision{}, err
	}
	if r.closed.Load() {
		return Decision{}, ErrClosed
	}
	bucket, remaining := bucketOf(r.opts.Now(), r.opts.Window)
	b := strconv.FormatInt(bucket, 10)
	keys := []string{
		r.opts.Prefix + "rl:" + meshID + ":" + b,
		r.opts.Prefix + "rli:" + meshID + ":" + sender + ":" + clientMessageID + ":" + b,
	}
	ok, err := script.Run(ctx, r.client, keys, r.opts.Limit, r.ttlMS).Int64()
	if err != nil {
		if errors.Is(err, redis.ErrClosed) {
			return Decision{}, ErrClosed
		}
		return Decision{}, fmt.Errorf("ratelimit: redis consume: %w", err)
	}
	if ok == 1 {
		return Decision{Allowed: true}, nil
	}
	return Decision{RetryAfter: remaining}, nil
}

// Close closes the connection pool; later Consume calls return ErrClosed.
func (r *Redis) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	return r.client.Close()
}

// used reports the messages charged to meshID in the bucket containing at.
func (r *Redis) used(ctx context.Context, meshID string, at time.Time) (int, error) {
	bucket, _ := bucketOf(at, r.opts.Window)
	n, err := r.client.Get(ctx, r.opts.Prefix+"rl:"+meshID+":"+strconv.FormatInt(bucket, 10)).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}
