package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestMemoryKeepsTwoBuckets(t *testing.T) {
	cases := []struct {
		name  string
		steps []time.Duration // clock advances, one Consume after each
		want  int
	}{
		{"one window", []time.Duration{0, time.Second, time.Second}, 1},
		{"two windows", []time.Duration{0, testWindow}, 2},
		{"many windows", []time.Duration{0, testWindow, testWindow, testWindow, testWindow}, 2},
		{"jump", []time.Duration{0, 10 * testWindow}, 1},
		{"clock back a little", []time.Duration{0, testWindow, -testWindow}, 2},
		{"clock back far", []time.Duration{0, 10 * testWindow, -5 * testWindow}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock(0)
			m := NewMemory(Options{Limit: 100, Window: testWindow, Now: clk.Now})
			for i, d := range tc.steps {
				clk.Advance(d)
				mustAllow(t, m, mesh(1), id(i))
			}
			if got := m.retained(); got != tc.want {
				t.Fatalf("retained %d buckets, want %d", got, tc.want)
			}
		})
	}
}

// TestMemoryClockBackCharged: a clock stepping back past the retained buckets
// is charged against the newest bucket, never given a fresh budget.
func TestMemoryClockBackCharged(t *testing.T) {
	clk := newClock(0)
	m := NewMemory(Options{Limit: 2, Window: testWindow, Now: clk.Now})
	clk.Advance(10 * testWindow)
	mustAllow(t, m, mesh(1), id(1))
	newest := clk.Now()
	clk.Advance(-5 * testWindow)
	mustAllow(t, m, mesh(1), id(1)) // already paid in the newest bucket
	mustAllow(t, m, mesh(1), id(2))
	mustDeny(t, m, mesh(1), id(3), testWindow)
	mustUsed(t, m, mesh(1), newest, 2)
}

func TestInvalidInput(t *testing.T) {
	cases := []struct {
		name, mesh, sender, cmid string
	}{
		{"empty mesh", "", sender, "x"},
		{"empty sender", mesh(1), "", "x"},
		{"empty client_message_id", mesh(1), sender, ""},
		{"colon in mesh", "a:b", sender, "x"},
		{"colon in sender", mesh(1), "a:b", "x"},
	}
	forEach(t, func(t *testing.T, open func(testing.TB, Options) testLimiter) {
		l := open(t, Options{Limit: 1, Window: testWindow})
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				d, err := l.Consume(context.Background(), tc.mesh, tc.sender, tc.cmid)
				if !errors.Is(err, ErrInvalidID) || d.Allowed {
					t.Fatalf("Consume = %+v, %v; want ErrInvalidID", d, err)
				}
			})
		}
		// Nothing was charged.
		mustAllow(t, l, mesh(1), "x")
	})
}

func TestClosedAndCancelled(t *testing.T) {
	forEach(t, func(t *testing.T, open func(testing.TB, Options) testLimiter) {
		l := open(t, Options{Limit: 1, Window: testWindow})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if d, err := l.Consume(ctx, mesh(1), sender, id(1)); err == nil || d.Allowed {
			t.Fatalf("Consume with cancelled context = %+v, %v; want an error", d, err)
		}
		mustAllow(t, l, mesh(1), id(1)) // the cancelled call charged nothing
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if d, err := l.Consume(context.Background(), mesh(1), sender, id(1)); !errors.Is(err, ErrClosed) || d.Allowed {
			t.Fatalf("Consume after Close = %+v, %v; want ErrClosed", d, err)
		}
	})
}

func TestOptionsDefaults(t *testing.T) {
	cases := []struct {
		name   string
		in     Options
		limit  int
		window time.Duration
	}{
		{"zero", Options{}, DefaultLimit, DefaultWindow},
		{"negative", Options{Limit: -1, Window: -time.Second}, DefaultLimit, DefaultWindow},
		{"set", Options{Limit: 7, Window: time.Second, Now: epoch.Local}, 7, time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.in.normalized()
			if o.Limit != tc.limit || o.Window != tc.window || o.Now == nil {
				t.Fatalf("normalized = %+v", o)
			}
		})
	}
	if DefaultLimit != 6000 || DefaultWindow != time.Minute {
		t.Fatalf("defaults %d per %v, want 6000 per 1m", DefaultLimit, DefaultWindow)
	}
}

func TestBucketOf(t *testing.T) {
	cases := []struct {
		now       time.Time
		window    time.Duration
		bucket    int64
		remaining time.Duration
	}{
		{time.Unix(0, 0), time.Minute, 0, time.Minute},
		{time.Unix(59, 999_999_999), time.Minute, 0, time.Nanosecond},
		{time.Unix(60, 0), time.Minute, 1, time.Minute},
		{time.Unix(-1, 0), time.Minute, -1, time.Second},
		{epoch.Add(10 * time.Second), time.Minute, 30_000_000, 50 * time.Second},
	}
	for _, tc := range cases {
		b, r := bucketOf(tc.now, tc.window)
		if b != tc.bucket || r != tc.remaining {
			t.Errorf("bucketOf(%v, %v) = %d, %v; want %d, %v", tc.now.UTC(), tc.window, b, r, tc.bucket, tc.remaining)
		}
	}
}

func TestNewRedisErrors(t *testing.T) {
	cases := []struct {
		name string
		url  string
		opts Options
	}{
		{"bad scheme", "http://127.0.0.1:6379/0", Options{}},
		{"not a url", "::::", Options{}},
		{"nothing listening", "redis://127.0.0.1:1/0?max_retries=-1&dial_timeout=200ms", Options{}},
		{"window under 1ms", "redis://127.0.0.1:6379/0", Options{Window: time.Microsecond}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			r, err := NewRedis(ctx, tc.url, tc.opts)
			if err == nil {
				_ = r.Close()
				t.Fatalf("NewRedis(%q) succeeded, want an error", tc.url)
			}
		})
	}
}
