package gopool

import (
	"sync"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// TestIdleBounded: after a burst of more functions than maxIdle at once,
// maxIdle goroutines stay to wait for work and the others end.
func TestIdleBounded(t *testing.T) {
	const maxIdle = 64
	p := New(maxIdle)
	const burst = 3 * maxIdle
	release := make(chan struct{})
	var running sync.WaitGroup
	running.Add(burst)
	for range burst {
		p.Go(func() { running.Done(); <-release })
	}
	running.Wait() // each on a worker of its own
	close(release)
	if err := wait.Until(5*time.Second, "the idle workers to settle", func() bool { return p.waiting.Load() == maxIdle }); err != nil {
		t.Fatalf("%v: %d workers wait after the burst, want %d", err, p.waiting.Load(), maxIdle)
	}
	ran := make(chan struct{})
	p.Go(func() { close(ran) }) // a waiting worker takes it
	<-ran
}
