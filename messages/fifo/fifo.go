// Package fifo is a queue bounded like a buffered channel whose memory
// grows with what is queued instead of being set aside for the bound up
// front: the send queue of a WebSocket, the buffer of an event stream. A
// connection or stream that never has more than a few items waiting costs
// a few slots, not the bound's thousands — which matters when a daemon
// holds a connection and a stream per agent session.
package fifo

import "sync"

// Queue is a FIFO of at most max items, safe for one consumer and any
// number of producers.
type Queue[T any] struct {
	mu    sync.Mutex
	items []T
	head  int
	max   int
	ready chan struct{} // holds a token while items are queued
	done  chan struct{} // closed by Close
	shut  bool          // under mu
}

// New returns an empty queue of at most max items.
func New[T any](max int) *Queue[T] {
	return &Queue[T]{max: max, ready: make(chan struct{}, 1), done: make(chan struct{})}
}

// Push appends v; it reports false, queuing nothing, when the queue holds
// max items already or was closed.
func (q *Queue[T]) Push(v T) bool {
	q.mu.Lock()
	if q.shut || len(q.items)-q.head >= q.max {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, v)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// Close ends the queue: Push refuses from now on and Done is closed. What
// is queued stays for Pop. Closing twice is harmless.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.shut {
		q.shut = true
		close(q.done)
	}
}

// Done is closed once the queue is closed.
func (q *Queue[T]) Done() <-chan struct{} { return q.done }

// Len is the number of items queued.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) - q.head
}

// Ready delivers a token when items may be queued; the consumer then Pops
// until it reports none.
func (q *Queue[T]) Ready() <-chan struct{} { return q.ready }

// Pop removes and returns the oldest item; ok is false when the queue is
// empty. An emptied queue gives back a storage grown for a burst.
func (q *Queue[T]) Pop() (v T, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.items) {
		return v, false
	}
	v = q.items[q.head]
	var zero T
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		if cap(q.items) > 64 {
			q.items = nil
		} else {
			q.items = q.items[:0]
		}
		q.head = 0
	}
	return v, true
}
