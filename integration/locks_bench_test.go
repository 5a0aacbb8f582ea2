package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// benchSessions registers n agent sessions on the daemon of e (mesh
// local) and waits until each one's broker connection answers.
func benchSessions(b *testing.B, e *env, n int) []*ipc.Client {
	c := ipc.NewClient(e.socket())
	out := make([]*ipc.Client, n)
	for i := range n {
		tok := make([]byte, 32)
		rand.Read(tok)
		if _, err := c.RegisterSession(context.Background(), &messages.RegisterSession{Token: hex.EncodeToString(tok),
			SessionID: fmt.Sprint("bench-", i), Mesh: "local", DisplayName: fmt.Sprint("bench-", i), PID: os.Getpid(), Cwd: "/tmp"}); err != nil {
			b.Fatal(err)
		}
		out[i] = c.AsSession(hex.EncodeToString(tok))
		var err error
		if werr := wait.Until(startDeadline, fmt.Sprint("session ", i, " connected"), func() bool {
			_, err = out[i].Locks(context.Background(), "", "")
			return err == nil
		}); werr != nil {
			b.Fatalf("%v: %v", werr, err)
		}
	}
	return out
}

// BenchmarkLockRoundTrip: an agent session takes a lock and releases it,
// each a round trip from an IPC client through the daemon (the session's
// broker connection) to the broker and back; the daemon's embedded broker
// on SQLite, as `claudemesh daemon up` runs it with no mesh joined. It
// reports the p50 and p99 of each, in ms.
func BenchmarkLockRoundTrip(b *testing.B) {
	e := benchHookEnv(b)
	stop := benchDaemon(b, e)
	defer stop()
	c := benchSessions(b, e, 1)[0]
	ctx := context.Background()
	acquires, releases := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		got, err := c.AcquireLock(ctx, &messages.LockAcquireRequest{Key: "file:src/lib.rs"})
		if err != nil || !got.Granted {
			b.Fatalf("acquire: %+v, %v", got, err)
		}
		acquires = append(acquires, time.Since(start))
		start = time.Now()
		if _, err := c.ReleaseLock(ctx, &messages.LockReleaseRequest{Key: "file:src/lib.rs", FenceToken: got.Lock.FenceToken}); err != nil {
			b.Fatal(err)
		}
		releases = append(releases, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, "lock_acquire", acquires)
	reportPercentiles(b, "lock_release", releases)
}

// BenchmarkLockContended: 8 agent sessions of one daemon (embedded broker)
// take turns at one lock, each waiting for it, holding it for nothing and
// releasing it; it reports the handoffs per second.
func BenchmarkLockContended(b *testing.B) {
	e := benchHookEnv(b)
	stop := benchDaemon(b, e)
	defer stop()
	agents := benchSessions(b, e, 8)
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	left := b.N
	b.ResetTimer()
	start := time.Now()
	for _, c := range agents {
		wg.Go(func() {
			for {
				mu.Lock()
				if left == 0 {
					mu.Unlock()
					return
				}
				left--
				mu.Unlock()
				got, err := c.AcquireLock(ctx, &messages.LockAcquireRequest{Key: "hot", WaitMs: 60000})
				if err != nil || !got.Granted {
					b.Errorf("acquire: %+v, %v", got, err)
					return
				}
				if _, err := c.ReleaseLock(ctx, &messages.LockReleaseRequest{Key: "hot", FenceToken: got.Lock.FenceToken}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "handoffs/s")
}
