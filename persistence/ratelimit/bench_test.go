package ratelimit

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkConsume measures Consume on both implementations:
//
//	new-id           every call a distinct id, always within budget (INCR + SET path)
//	retry            the same id again and again (the free "already paid" path)
//	denied           budget exhausted, every call a new id (INCR + DECR refund path)
//	parallel-new-id  new-id from GOMAXPROCS goroutines (RunParallel)
//
// Except for denied, the clock is the wall clock with a 2 s window, so buckets
// roll and Memory and Redis stay bounded during long runs.
//
//	CLAUDEMESH_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test -run '^$' -bench BenchmarkConsume -benchtime 2s ./persistence/ratelimit/
func BenchmarkConsume(b *testing.B) {
	for _, im := range impls() {
		b.Run(im.name, func(b *testing.B) {
			b.Run("new-id", func(b *testing.B) {
				l := im.open(b, Options{Limit: 1 << 30, Window: 2 * time.Second})
				benchSerial(b, l, func(i int) string { return "n" + strconv.Itoa(i) }, true)
			})
			b.Run("retry", func(b *testing.B) {
				l := im.open(b, Options{Limit: 1 << 30, Window: 2 * time.Second})
				benchSerial(b, l, func(int) string { return "same" }, true)
			})
			b.Run("denied", func(b *testing.B) {
				// A frozen clock: the window never rolls during the run.
				l := im.open(b, Options{Limit: 1, Window: testWindow, Now: func() time.Time { return epoch }})
				if _, err := l.Consume(context.Background(), mesh(1), sender, "first"); err != nil {
					b.Fatal(err)
				}
				benchSerial(b, l, func(i int) string { return "d" + strconv.Itoa(i) }, false)
			})
			b.Run("parallel-new-id", func(b *testing.B) {
				l := im.open(b, Options{Limit: 1 << 30, Window: 2 * time.Second})
				var next atomic.Int64
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						d, err := l.Consume(ctx, mesh(1), sender, "p"+strconv.FormatInt(next.Add(1), 10))
						if err != nil || !d.Allowed {
							b.Errorf("Consume = %+v, %v", d, err)
							return
						}
					}
				})
				reportOps(b)
			})
		})
	}
}

func benchSerial(b *testing.B, l Limiter, idOf func(int) string, wantAllowed bool) {
	ctx := context.Background()
	m := mesh(1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, err := l.Consume(ctx, m, sender, idOf(i))
		if err != nil || d.Allowed != wantAllowed {
			b.Fatalf("Consume = %+v, %v; want allowed=%v", d, err, wantAllowed)
		}
	}
	reportOps(b)
}

func reportOps(b *testing.B) {
	b.StopTimer()
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "ops/s")
	}
}
