package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// testLimiter is a Limiter whose counter the tests can read.
type testLimiter interface {
	Limiter
	used(ctx context.Context, meshID string, at time.Time) (int, error)
}

type impl struct {
	name string
	open func(t testing.TB, opts Options) testLimiter
}

func impls() []impl {
	return []impl{
		{"memory", func(t testing.TB, opts Options) testLimiter {
			m := NewMemory(opts)
			t.Cleanup(func() { _ = m.Close() })
			return m
		}},
		{"redis", func(t testing.TB, opts Options) testLimiter { return openRedis(t, opts) }},
	}
}

// redisURL returns CLAUDEMESH_TEST_REDIS_URL; without it the test is skipped,
// or fails under CI=true.
func redisURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("CLAUDEMESH_TEST_REDIS_URL")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CLAUDEMESH_TEST_REDIS_URL is unset under CI=true")
		}
		t.Skip("CLAUDEMESH_TEST_REDIS_URL is unset")
	}
	return url
}

// testPrefix is a fresh key prefix; its keys are deleted when the test ends.
// Nothing global is ever flushed.
func testPrefix(t testing.TB) string {
	t.Helper()
	raw := make([]byte, 8)
	_, _ = rand.Read(raw)
	prefix := "cmtest:" + hex.EncodeToString(raw) + ":"
	url := redisURL(t)
	t.Cleanup(func() {
		ro, err := redis.ParseURL(url)
		if err != nil {
			t.Errorf("parse %s: %v", url, err)
			return
		}
		c := redis.NewClient(ro)
		defer c.Close()
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
			if len(keys) == 1000 {
				c.Unlink(ctx, keys...)
				keys = keys[:0]
			}
		}
		if len(keys) > 0 {
			c.Unlink(ctx, keys...)
		}
		if err := iter.Err(); err != nil {
			t.Errorf("cleanup %s*: %v", prefix, err)
		}
	})
	return prefix
}

// openRedis opens a Redis limiter; opts.Prefix "" means a fresh test prefix.
func openRedis(t testing.TB, opts Options) *Redis {
	t.Helper()
	url := redisURL(t)
	if opts.Prefix == "" {
		opts.Prefix = testPrefix(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := NewRedis(ctx, url, opts)
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// epoch is the start of a 60 s (and 1 s, 10 s) bucket.
var epoch = time.Unix(1_800_000_000, 0)

const testWindow = 60 * time.Second

func newClock(offset time.Duration) *brokertest.Clock { return brokertest.NewClock(epoch.Add(offset)) }

// sender is the sender of the tests' ids, unless one says otherwise.
const sender = "5e4de7"

func consume(t *testing.T, l Limiter, mesh, id string) Decision {
	t.Helper()
	return consumeAs(t, l, mesh, sender, id)
}

func consumeAs(t *testing.T, l Limiter, mesh, from, id string) Decision {
	t.Helper()
	d, err := l.Consume(context.Background(), mesh, from, id)
	if err != nil {
		t.Fatalf("Consume(%s, %s): %v", mesh, id, err)
	}
	return d
}

func mustAllow(t *testing.T, l Limiter, mesh, id string) {
	t.Helper()
	if d := consume(t, l, mesh, id); !d.Allowed || d.RetryAfter != 0 {
		t.Fatalf("Consume(%s, %s) = %+v, want allowed", mesh, id, d)
	}
}

func mustDeny(t *testing.T, l Limiter, mesh, id string, window time.Duration) Decision {
	t.Helper()
	d := consume(t, l, mesh, id)
	if d.Allowed {
		t.Fatalf("Consume(%s, %s) allowed, want denied", mesh, id)
	}
	if d.RetryAfter <= 0 || d.RetryAfter > window {
		t.Fatalf("Consume(%s, %s) RetryAfter = %v, want in (0, %v]", mesh, id, d.RetryAfter, window)
	}
	return d
}

func mustUsed(t *testing.T, l testLimiter, mesh string, at time.Time, want int) {
	t.Helper()
	got, err := l.used(context.Background(), mesh, at)
	if err != nil {
		t.Fatalf("used(%s): %v", mesh, err)
	}
	if got != want {
		t.Fatalf("used(%s) = %d, want %d", mesh, got, want)
	}
}

func mesh(n int) string { return fmt.Sprintf("01J0MESH%04d", n) }
func id(n int) string   { return fmt.Sprintf("cmid-%04d", n) }

// forEach runs fn as a subtest per implementation.
func forEach(t *testing.T, fn func(t *testing.T, open func(testing.TB, Options) testLimiter)) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) { fn(t, im.open) })
	}
}

func TestLimitWithinWindow(t *testing.T) {
	cases := []struct {
		name      string
		limit     int
		window    time.Duration
		offset    time.Duration // into the bucket
		wantRetry time.Duration
	}{
		{"limit 1, start of window", 1, testWindow, 0, testWindow},
		{"limit 5, mid window", 5, testWindow, 10 * time.Second, 50 * time.Second},
		{"limit 30, last ms", 30, testWindow, testWindow - time.Millisecond, time.Millisecond},
		{"limit 3, 1s window", 3, time.Second, 250 * time.Millisecond, 750 * time.Millisecond},
	}
	forEach(t, func(t *testing.T, open func(testing.TB, Options) testLimiter) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				clk := newClock(tc.offset)
				l := open(t, Options{Limit: tc.limit, Window: tc.window, Now: clk.Now})
				for i := range tc.limit {
					mustAllow(t, l, mesh(1), id(i))
				}
				d := mustDeny(t, l, mesh(1), id(tc.limit), tc.window)
				if d.RetryAfter != tc.wantRetry {
					t.Fatalf("RetryAfter = %v, want %v", d.RetryAfter, tc.wantRetry)
				}
				mustUsed(t, l, mesh(1), clk.Now(), tc.limit)
				// Another mesh has its own budget.
				mustAllow(t, l, mesh(2), id(tc.limit))
				mustUsed(t, l, mesh(2), clk.Now(), 1)
			})
		}
	})
}

func TestRetryOfPaidIDIsFree(t *testing.T) {
	cases := []struct {
		name    string
		limit   int
		paid    int // distinct ids charged first
		retries int // retries of each paid id
	}{
		{"budget exhausted", 3, 3, 5},
		{"budget left", 5, 2, 10},
		{"limit 1", 1, 1, 3},
	}
	forEach(t, func(t *testing.T, open func(testing.TB, Options) testLimiter) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				clk := newClock(5 * time.Second)
				l := open(t, Options{Limit: tc.limit, Window: testWindow, Now: clk.Now})
				for i := range tc.paid {
					mustAllow(t, l, mesh(1), id(i))
				}
				for range tc.retries {
					for i := range tc.paid {
						mustAllow(t, l, mesh(1), id(i))
						clk.Advance(time.Millisecond)
					}
				}
				mustUsed(t, l, mesh(1), clk.Now(), tc.paid)
				// The retries did not eat the remaining budget.
				for i := tc.paid; i < tc.limit; i++ {
					mustAllow(t, l, mesh(1), id(i))
				}
				mustDeny(t, l, mesh(1), id(tc.limit), testWindow)
				mustUsed(t, l, mesh(1), clk.Now(), tc.limit)
			})
		}
	})
}

// TestIDPerSender: a client_message_id belongs to its sender. Another
// sender's message with a paid id is another message: it pays, and is
// denied once the budget is gone; each sender's retry stays free.
func TestIDPerSender(t *testing.T) {
	forEach(t, func(t *testing.T, open func(testing.TB, Options) testLimiter) {
		clk := newClock(time.Second)
		l := open(t, Options{Limit: 2, Window: testWindow, Now: clk.Now})
		alice, bob, carol := "a11ce", "b0b", "ca401"
		for _, from := range []string{alice, bob} {
			if d := consumeAs(t, l, mesh(1), from, "xm-1"); !d.Allowed {
				t.Fatalf("%s's xm-1: %+v, want allowed", from, d)
			}
		}
		mustUsed(t, l, mesh(1), clk.Now(), 2)
		for _, from := range []string{alice, bob} {
			if d := consumeAs(t, l, mesh(1), from, "xm-1"); !d.Allowed {
				t.Fatalf("%s's retry of xm-1: %+v, want allowed (paid)", from, d)
			}
		}
		if d := consumeAs(t, l, mesh(1), carol, "xm-1"); d.Allowed {
			t.Fatalf("carol's xm-1 with the budget spent: %+v, want denied", d)
		}
		mustUsed(t, l, mesh(1), clk.Now(), 2)
	})
}

func TestDeniedAttemptDoesNotConsume(t *testing.T) {
	cases := []struct {
		name    string
		limit   int
		denials int
	}{
		{"one denial", 2, 1},
		{"many denials of one id", 4, 20},
	}
	forEach(t, func(t *testing.T, open func(testing.TB, Options) testLimiter) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				clk := newClock(0)
				l := open(t, Options{Limit: tc.limit, Window: testWindow, Now: clk.Now})
				for i := range tc.limit {
					mustAllow(t, l, mesh(1), id(i))
				}
				for range tc.denials {
					// The same denied id stays denied: a deny marks nothing as paid.
					mustDeny(t, l, mesh(1), id(tc.limit), testWindow)
					mustDeny(t, l, mesh(1), id(tc.limit+1), testWindow)
				}
				mustUsed(t, l, mesh(1), clk.Now(), tc.limit)
				for i := range tc.limit {
					mustAllow(t, l, mesh(1), id(i))
				}
				mustUsed(t, l, mesh(1), clk.Now(), tc.limit)
			})
		}
	})
}

func TestNextWindowStartsFresh(t *testing.T) {
	cases := []struct {
		name    string
		advance time.Duration // from 10 s into the first window
	}{
		{"next window", 50 * time.Second},
		{"next window, late", 109 * time.Second},
		{"two windows later", 2 * testWindow},
		{"an hour later", time.Hour},
	}
	forEach(t, func(t *testing.T, open func(testing.TB, Options) testLimiter) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				const limit = 3
				clk := newClock(10 * time.Second)
				l := open(t, Options{Limit: limit, Window: testWindow, Now: clk.Now})
				first := clk.Now()
				for i := range limit {
					mustAllow(t, l, mesh(1), id(i))
				}
				mustDeny(t, l, mesh(1), id(limit), testWindow)
				clk.Advance(tc.advance)
				mustUsed(t, l, mesh(1), clk.Now(), 0)
				// A late retry of an id that paid last window is new traffic.
				mustAllow(t, l, mesh(1), id(0))
				mustUsed(t, l, mesh(1), clk.Now(), 1)
				for i := limit; i < 2*limit-1; i++ {
					mustAllow(t, l, mesh(1), id(i))
				}
				mustDeny(t, l, mesh(1), id(2*limit), testWindow)
				mustUsed(t, l, mesh(1), clk.Now(), limit)
				if tc.advance < 2*testWindow {
					// The previous window's counter is untouched.
					mustUsed(t, l, mesh(1), first, limit)
				}
			})
		}
	})
}

func TestConcurrentConsume(t *testing.T) {
	const (
		calls    = 200
		distinct = 50
		limit    = 30
	)
	forEach(t, func(t *testing.T, open func(testing.TB, Options) testLimiter) {
		clk := newClock(time.Second)
		l := open(t, Options{Limit: limit, Window: testWindow, Now: clk.Now})
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			results = make([]Decision, calls)
			errs    = make([]error, calls)
		)
		for i := range calls {
			wg.Go(func() {
				<-start
				results[i], errs[i] = l.Consume(context.Background(), mesh(1), sender, id(i%distinct))
			})
		}
		close(start)
		wg.Wait()
		allowed := map[string]int{}
		denied := map[string]int{}
		for i, d := range results {
			if errs[i] != nil {
				t.Fatalf("call %d: %v", i, errs[i])
			}
			if d.Allowed {
				allowed[id(i%distinct)]++
			} else {
				denied[id(i%distinct)]++
			}
		}
		if len(allowed) != limit {
			t.Fatalf("%d distinct ids allowed, want %d", len(allowed), limit)
		}
		for cmid, n := range allowed {
			if n != calls/distinct {
				t.Errorf("id %s: %d of %d calls allowed, %d denied", cmid, n, calls/distinct, denied[cmid])
			}
		}
		mustUsed(t, l, mesh(1), clk.Now(), limit)
	})
}

func TestReplicasShareBudget(t *testing.T) {
	cases := []struct {
		name  string
		limit int
	}{
		{"limit 4", 4},
		{"limit 25", 25},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prefix := testPrefix(t)
			clk := newClock(3 * time.Second)
			opts := Options{Limit: tc.limit, Window: testWindow, Now: clk.Now, Prefix: prefix}
			a, b := openRedis(t, opts), openRedis(t, opts)
			replicas := []*Redis{a, b}
			for i := range tc.limit {
				mustAllow(t, replicas[i%2], mesh(1), id(i))
			}
			// Budget spent across both: each replica denies a new id.
			mustDeny(t, a, mesh(1), id(tc.limit), testWindow)
			mustDeny(t, b, mesh(1), id(tc.limit+1), testWindow)
			// An id paid on one replica is free on the other.
			for i := range tc.limit {
				mustAllow(t, replicas[(i+1)%2], mesh(1), id(i))
			}
			mustUsed(t, a, mesh(1), clk.Now(), tc.limit)
			mustUsed(t, b, mesh(1), clk.Now(), tc.limit)

			// Concurrent traffic through both replicas still allows exactly limit ids.
			clk.Advance(testWindow)
			var wg sync.WaitGroup
			var mu sync.Mutex
			got := map[string]bool{}
			for i := range 4 * tc.limit {
				wg.Go(func() {
					d, err := replicas[i%2].Consume(context.Background(), mesh(1), sender, id(i/2))
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
						mu.Lock()
						got[id(i/2)] = true
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if len(got) != tc.limit {
				t.Fatalf("%d ids allowed across replicas, want %d", len(got), tc.limit)
			}
			mustUsed(t, a, mesh(1), clk.Now(), tc.limit)
		})
	}
}

func TestRedisKeysAndExpiry(t *testing.T) {
	cases := []struct {
		name   string
		window time.Duration
	}{
		{"60s", 60 * time.Second},
		{"10s", 10 * time.Second},
		{"1500ms", 1500 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock(0)
			r := openRedis(t, Options{Limit: 1, Window: tc.window, Now: clk.Now})
			mustAllow(t, r, mesh(1), "a:b")
			mustDeny(t, r, mesh(1), "c", tc.window)
			bucket, _ := bucketOf(clk.Now(), tc.window)
			ctx := context.Background()
			for _, key := range []string{
				fmt.Sprintf("%srl:%s:%d", r.opts.Prefix, mesh(1), bucket),
				fmt.Sprintf("%srli:%s:%s:a:b:%d", r.opts.Prefix, mesh(1), sender, bucket),
			} {
				ttl, err := r.client.PTTL(ctx, key).Result()
				if err != nil {
					t.Fatal(err)
				}
				if ttl <= 0 || ttl > 2*tc.window {
					t.Errorf("PTTL %s = %v, want in (0, %v]", key, ttl, 2*tc.window)
				}
			}
			denied := fmt.Sprintf("%srli:%s:%s:c:%d", r.opts.Prefix, mesh(1), sender, bucket)
			if n, err := r.client.Exists(ctx, denied).Result(); err != nil || n != 0 {
				t.Errorf("EXISTS %s = %d, %v; a denied id must not be marked paid", denied, n, err)
			}
		})
	}
}

// TestRedisScriptLoaded: NewRedis loads the script (SCRIPT LOAD), so the
// steady state is one EVALSHA per Consume.
func TestRedisScriptLoaded(t *testing.T) {
	r := openRedis(t, Options{Limit: 1, Window: testWindow})
	ok, err := r.client.ScriptExists(context.Background(), script.Hash()).Result()
	if err != nil || len(ok) != 1 || !ok[0] {
		t.Fatalf("SCRIPT EXISTS %s = %v, %v", script.Hash(), ok, err)
	}
}
