package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestBucket: the upstream broker's token bucket — a burst, then one token
// per Window/Limit, per sender; refusals carry no retry-after; a retry pays
// again; bad ids and a closed limiter are errors.
func TestBucket(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_000_000, 0)
	b := NewBucket(Options{Limit: 60, Window: time.Minute, Now: func() time.Time { return now }}, 10)
	consume := func(sender, id string) Decision {
		t.Helper()
		d, err := b.Consume(ctx, "mesh", sender, id)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if b.PerMinute() != 60 || b.Burst() != 10 {
		t.Fatalf("PerMinute %d, Burst %d; want 60, 10", b.PerMinute(), b.Burst())
	}
	for i := range 10 {
		if d := consume("alice", fmt.Sprint(i)); !d.Allowed {
			t.Fatalf("send %d of the burst refused", i)
		}
	}
	if d := consume("alice", "10"); d.Allowed || d.RetryAfter != 0 {
		t.Fatalf("the 11th send at once: %+v; want refused, no retry-after", d)
	}
	if d := consume("bob", "0"); !d.Allowed {
		t.Fatal("another sender's bucket is empty too")
	}
	now = now.Add(999 * time.Millisecond)
	if d := consume("alice", "10"); d.Allowed {
		t.Fatal("a token before a second has passed")
	}
	now = now.Add(time.Millisecond)
	if d := consume("alice", "10"); !d.Allowed {
		t.Fatal("no token after a second")
	}
	if d := consume("alice", "10"); d.Allowed {
		t.Fatal("a retry of an id that paid passed free: upstream's bucket is not idempotent")
	}
	now = now.Add(time.Hour)
	for i := range 10 {
		if d := consume("alice", fmt.Sprint("later", i)); !d.Allowed {
			t.Fatalf("after an hour, send %d refused: the bucket holds at most the burst, but that much", i)
		}
	}
	if d := consume("alice", "later-10"); d.Allowed {
		t.Fatal("the bucket filled past its burst")
	}
	if _, err := b.Consume(ctx, "mesh", "a:b", "x"); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("sender with ':': %v", err)
	}
	b.Close()
	if _, err := b.Consume(ctx, "mesh", "alice", "x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestBucketForgetsFull: buckets that refilled are dropped once there are
// many, so memory follows the recent senders only.
func TestBucketForgetsFull(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	b := NewBucket(Options{Limit: 60, Window: time.Minute, Now: func() time.Time { return now }}, 0)
	for i := range 1024 {
		if _, err := b.Consume(context.Background(), "mesh", fmt.Sprint("s", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(500 * time.Millisecond) // half the token each spent is back: none is full
	b.Consume(context.Background(), "mesh", "new-1", "x")
	if n := len(b.buckets); n != 1025 {
		t.Fatalf("%d buckets, want all 1025 kept (none refilled)", n)
	}
	now = now.Add(time.Minute)
	b.Consume(context.Background(), "mesh", "new-2", "x")
	if n := len(b.buckets); n != 1 {
		t.Fatalf("%d buckets after all refilled, want only the new sender's", n)
	}
}
