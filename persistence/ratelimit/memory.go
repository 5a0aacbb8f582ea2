package ratelimit

import (
	"context"
	"sync"
	"time"
)

// Memory is the in-process limiter for a single broker node.
type Memory struct {
	opts Options

	mu      sync.Mutex
	closed  bool
	newest  int64 // newest bucket seen; valid when len(buckets) > 0
	buckets map[int64]*memBucket
}

type memBucket struct {
	used map[string]int       // mesh -> messages charged in this bucket
	paid map[paidKey]struct{} // (mesh, sender, cmid) that paid in this bucket
}

type paidKey struct{ mesh, sender, cmid string }

var _ Limiter = (*Memory)(nil)

// NewMemory returns an in-memory limiter; see Options for the defaults.
func NewMemory(opts Options) *Memory {
	return &Memory{opts: opts.normalized(), buckets: make(map[int64]*memBucket, 2)}
}

// Consume implements Limiter.
func (m *Memory) Consume(ctx context.Context, meshID, sender, clientMessageID string) (Decision, error) {
	if err := validate(meshID, sender, clientMessageID); err != nil {
		return Decision{}, err
	}
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	bucket, remaining := bucketOf(m.opts.Now(), m.opts.Window)

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Decision{}, ErrClosed
	}
	b := m.bucketLocked(bucket)
	if b == nil {
		// The clock stepped back past the retained buckets: charge the newest.
		b = m.buckets[m.newest]
		remaining = m.opts.Window
	}
	k := paidKey{meshID, sender, clientMessageID}
	if _, ok := b.paid[k]; ok {
		return Decision{Allowed: true}, nil
	}
	if b.used[meshID] >= m.opts.Limit {
		return Decision{RetryAfter: remaining}, nil
	}
	b.used[meshID]++
	b.paid[k] = struct{}{}
	return Decision{Allowed: true}, nil
}

// bucketLocked returns the state of bucket, creating it and dropping every
// bucket older than the previous one when the window rolls. It returns nil
// for a bucket older than the retained ones.
func (m *Memory) bucketLocked(bucket int64) *memBucket {
	if b, ok := m.buckets[bucket]; ok {
		return b
	}
	if len(m.buckets) > 0 && bucket < m.newest-1 {
		return nil
	}
	if len(m.buckets) == 0 || bucket > m.newest {
		m.newest = bucket
		for old := range m.buckets {
			if old < bucket-1 {
				delete(m.buckets, old)
			}
		}
	}
	b := &memBucket{used: make(map[string]int), paid: make(map[paidKey]struct{})}
	m.buckets[bucket] = b
	return b
}

// Close drops all state; later Consume calls return ErrClosed.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.buckets = nil
	return nil
}

// used reports the messages charged to meshID in the bucket containing at.
func (m *Memory) used(_ context.Context, meshID string, at time.Time) (int, error) {
	bucket, _ := bucketOf(at, m.opts.Window)
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.buckets[bucket]; ok {
		return b.used[meshID], nil
	}
	return 0, nil
}

// retained reports how many buckets are held (for the bounded-memory test).
func (m *Memory) retained() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.buckets)
}
