package broker

import (
	"context"
	"testing"

	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// TestReservationFrames: reserve is granted with a fence token, and
// refused to another holder with the conflicts (holder, pattern,
// exclusivity, expiry); a shared request beside an exclusive one is
// refused, a disjoint one granted; reservation_release answers the
// patterns and pushes reservation_released to the mesh's other
// connections; list and check answer; bad input on every frame is an
// error frame with its code, and stores nothing.
func TestReservationFrames(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a, b := e.connect(alice, "a"), e.connect(bob, "b")
		a.send(map[string]any{"type": "reserve", "repo": "git:r", "patterns": []string{"src/**"}, "exclusive": true, "ttl_ms": 30000, "_reqId": "q1"})
		f := a.next("reservation_result")
		if f["_reqId"] != "q1" || f["granted"] != true || f["fence_token"] != float64(1) {
			t.Fatalf("reservation_result = %v", f)
		}
		for _, excl := range []bool{true, false} {
			b.send(map[string]any{"type": "reserve", "repo": "git:r", "patterns": []string{"src/app.py"}, "exclusive": excl, "ttl_ms": 30000,
				"_reqId": "q2"})
			f := b.next("reservation_result")
			cs, _ := f["conflicts"].([]any)
			if f["granted"] != false || len(cs) != 1 {
				t.Fatalf("bob's src/app.py (exclusive %v) = %v", excl, f)
			}
			c := cs[0].(map[string]any)
			if c["holder_name"] != "alice" || c["pattern"] != "src/**" || c["exclusive"] != true || c["expires_at"] == "" ||
				c["yours"] != "src/app.py" || c["path"] != "src/app.py" {
				t.Errorf("conflict = %v", c)
			}
		}
		b.send(map[string]any{"type": "reserve", "repo": "git:r", "patterns": []string{"docs/*.md"}, "exclusive": true, "ttl_ms": 30000, "_reqId": "q3"})
		if f := b.next("reservation_result"); f["granted"] != true || f["fence_token"] != float64(2) {
			t.Errorf("bob's docs/*.md = %v", f)
		}
		b.send(map[string]any{"type": "reservation_check", "repo": "git:r", "paths": []string{"src/app.py", "docs/a.md"}, "_reqId": "c"})
		if cs, _ := b.next("reservation_check_result")["conflicts"].([]any); len(cs) != 1 || cs[0].(map[string]any)["path"] != "src/app.py" {
			t.Errorf("check = %v", cs)
		}
		a.send(map[string]any{"type": "list_reservations", "repo": "git:r", "_reqId": "l"})
		if rs, _ := a.next("reservation_list")["reservations"].([]any); len(rs) != 2 {
			t.Errorf("list = %v", rs)
		}
		a.send(map[string]any{"type": "reservation_renew", "repo": "git:r", "fence_token": 1, "ttl_ms": 60000, "_reqId": "r"})
		if f := a.next("reservation_result"); f["granted"] != true || f["_reqId"] != "r" {
			t.Errorf("renew = %v", f)
		}
		a.send(map[string]any{"type": "reservation_release", "repo": "git:r", "_reqId": "x"})
		if f := a.next("reservation_released"); f["_reqId"] != "x" || len(f["patterns"].([]any)) != 1 {
			t.Errorf("reservation_released = %v", f)
		}
		if f := b.next("reservation_released"); f["repo"] != "git:r" || f["_reqId"] != nil {
			t.Errorf("reservation_released pushed = %v", f)
		}
		a.send(map[string]any{"type": "reservation_renew", "repo": "git:r", "fence_token": 1, "ttl_ms": 30000, "_reqId": "r2"})
		if f := a.next("error"); f["code"] != "reservation_not_held" || f["_reqId"] != "r2" {
			t.Errorf("a stale renewal = %v", f)
		}
		before := countReservations(t, e)
		for _, bad := range []struct {
			frame map[string]any
			code  string
		}{
			{map[string]any{"type": "reserve", "repo": "", "patterns": []string{"a"}, "ttl_ms": 30000}, "invalid_reservation_repo"},
			{map[string]any{"type": "reserve", "repo": "r", "patterns": []string{}, "ttl_ms": 30000}, "too_many_patterns"},
			{map[string]any{"type": "reserve", "repo": "r", "patterns": []string{"a//b"}, "ttl_ms": 30000}, "invalid_pattern"},
			{map[string]any{"type": "reserve", "repo": "r", "patterns": []string{"a"}, "ttl_ms": 5}, "invalid_reservation_ttl"},
			{map[string]any{"type": "reservation_renew", "repo": "r", "fence_token": 0, "ttl_ms": 30000}, "invalid_fence_token"},
			{map[string]any{"type": "reservation_release", "repo": "r\n", "patterns": []string{"a"}}, "invalid_reservation_repo"},
			{map[string]any{"type": "reservation_release", "repo": "r", "patterns": []string{"!a"}}, "invalid_pattern"},
			{map[string]any{"type": "reservation_check", "repo": "r", "paths": []string{"../x"}}, "invalid_path"},
			{map[string]any{"type": "reservation_check", "repo": "r", "paths": []string{}}, "too_many_paths"},
			{map[string]any{"type": "reservation_check", "repo": "", "paths": []string{"a"}}, "invalid_reservation_repo"},
			{map[string]any{"type": "list_reservations", "repo": "r\x01"}, "invalid_reservation_repo"},
		} {
			bad.frame["_reqId"] = "bad"
			a.send(bad.frame)
			if f := a.next("error"); f["code"] != bad.code || f["_reqId"] != "bad" {
				t.Errorf("%v: %v, want %s", bad.frame, f, bad.code)
			}
		}
		if n := countReservations(t, e); n != before {
			t.Errorf("bad input stored %d reservations", n-before)
		}
	})
}

func countReservations(t *testing.T, e *env) int {
	t.Helper()
	rs, err := e.store.Reservations(context.Background(), e.mesh.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	return len(rs)
}

// TestReservationAcrossReplicas: two replicas on one PostgreSQL database
// never grant conflicting reservations; a release on one is pushed to the
// other's connections.
func TestReservationAcrossReplicas(t *testing.T) {
	url := brokertest.PostgresURL(t)
	first := startBroker(t, broker.Options{DatabaseURL: url}, noLimit)
	second := attachBroker(t, first, broker.Options{DatabaseURL: url})
	a, b := first.connect(first.member("alice"), "a"), second.connect(first.member("bob"), "b")
	a.send(map[string]any{"type": "reserve", "repo": "git:r", "patterns": []string{"src/**"}, "exclusive": true, "ttl_ms": 30000, "_reqId": "1"})
	if f := a.next("reservation_result"); f["granted"] != true {
		t.Fatalf("first replica = %v", f)
	}
	b.send(map[string]any{"type": "reserve", "repo": "git:r", "patterns": []string{"src/a.go"}, "ttl_ms": 30000, "_reqId": "2"})
	if f := b.next("reservation_result"); f["granted"] != false {
		t.Errorf("second replica = %v", f)
	}
	a.send(map[string]any{"type": "reservation_release", "repo": "git:r", "_reqId": "r"})
	a.next("reservation_released")
	if f := b.next("reservation_released"); f["repo"] != "git:r" || f["_reqId"] != nil {
		t.Errorf("reservation_released on the other replica = %v", f)
	}
}
