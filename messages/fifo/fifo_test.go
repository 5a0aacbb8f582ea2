package fifo

import (
	"sync"
	"testing"
)

func TestQueueOrderAndBound(t *testing.T) {
	q := New[int](3)
	for i := range 3 {
		if !q.Push(i) {
			t.Fatalf("push %d refused", i)
		}
	}
	if q.Push(3) {
		t.Fatal("a fourth item was queued past the bound of 3")
	}
	<-q.Ready()
	for want := range 3 {
		if v, ok := q.Pop(); !ok || v != want {
			t.Fatalf("pop: %d %v, want %d", v, ok, want)
		}
	}
	if _, ok := q.Pop(); ok {
		t.Fatal("popped from an empty queue")
	}
	if !q.Push(9) {
		t.Fatal("an emptied queue refused a push")
	}
	q.Close()
	q.Close()
	select {
	case <-q.Done():
	default:
		t.Fatal("Done is open after Close")
	}
	if q.Push(10) {
		t.Fatal("a closed queue took a push")
	}
	if v, ok := q.Pop(); !ok || v != 9 || q.Len() != 0 {
		t.Fatalf("what was queued before Close: %d %v", v, ok)
	}
}

// TestQueueConcurrent: items pushed by several producers all come out
// once, each producer's in its order, to a consumer that waits on Ready.
func TestQueueConcurrent(t *testing.T) {
	const producers, each = 4, 10000
	q := New[[2]int](1 << 20)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				q.Push([2]int{p, i})
			}
		})
	}
	next := make([]int, producers)
	for got := 0; got < producers*each; {
		<-q.Ready()
		for v, ok := q.Pop(); ok; v, ok = q.Pop() {
			if v[1] != next[v[0]] {
				t.Fatalf("producer %d: got %d, want %d", v[0], v[1], next[v[0]])
			}
			next[v[0]]++
			got++
		}
	}
	wg.Wait()
}
