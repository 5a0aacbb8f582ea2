package actors

import (
	"slices"
	"testing"
)

// TestReqCalls: ids are fresh per call, a call is taken once, drain takes
// what is left.
func TestReqCalls(t *testing.T) {
	var r reqCalls[string]
	a, b, c := r.call("st", "a"), r.call("st", "b"), r.call("st", "c")
	if a != "st-1" || b != "st-2" || c != "st-3" {
		t.Fatalf("ids %s %s %s", a, b, c)
	}
	if got, ok := r.take(b); !ok || got != "b" {
		t.Errorf("take(%s) = %q, %v", b, got, ok)
	}
	if _, ok := r.take(b); ok {
		t.Errorf("taken twice")
	}
	if _, ok := r.take("st-9"); ok {
		t.Errorf("took an id never given")
	}
	left := r.drain()
	slices.Sort(left)
	if !slices.Equal(left, []string{"a", "c"}) || len(r.drain()) != 0 {
		t.Errorf("drain = %v", left)
	}
}
