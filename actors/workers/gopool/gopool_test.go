package gopool

import (
	"sync"
	"testing"
	"time"
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
	deadline := time.Now().Add(5 * time.Second)
	for p.waiting.Load() != maxIdle {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers wait after the burst, want %d", p.waiting.Load(), maxIdle)
		}
		time.Sleep(time.Millisecond) // poll interval: the condition is re-checked
	}
	ran := make(chan struct{})
	p.Go(func() { close(ran) }) // a waiting worker takes it
	<-ran
}
