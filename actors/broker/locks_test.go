package broker

import (
	"testing"

	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// TestLockFrames: lock_acquire is granted with a fence token to the first
// holder and refused to the next with the holder's lock; a session holds
// its locks as its session key; lock_release answers lock_released and
// pushes it to the mesh's other connections; list_locks lists the held
// locks; bad input is an error frame with its code.
func TestLockFrames(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		sess, err := meshcrypto.GenerateIdentity()
		if err != nil {
			t.Fatal(err)
		}
		sh := e.sessionHello(bob, sess, "s-1")
		sh["displayName"] = "bob-editor"
		a, b := e.connect(alice, "a"), e.connectWith(sh)

		a.send(map[string]any{"type": "lock_acquire", "key": "file:src/lib.rs", "repo": "r1", "ttl_ms": 30000, "_reqId": "q1"})
		f := a.next("lock_result")
		if f["_reqId"] != "q1" || f["granted"] != true || f["fence_token"] != float64(1) || f["holder"] != alice.id.PublicKeyHex() ||
			f["holder_name"] != "alice" || f["expires_at"] == "" || f["repo"] != "r1" {
			t.Fatalf("lock_result = %v", f)
		}
		b.send(map[string]any{"type": "lock_acquire", "key": "file:src/lib.rs", "repo": "r1", "ttl_ms": 30000, "_reqId": "q2"})
		if f := b.next("lock_result"); f["granted"] != false || f["holder"] != alice.id.PublicKeyHex() || f["fence_token"] != float64(1) {
			t.Errorf("a second acquirer = %v", f)
		}
		b.send(map[string]any{"type": "lock_acquire", "key": "file:src/lib.rs", "repo": "r2", "ttl_ms": 30000, "_reqId": "q3"})
		if f := b.next("lock_result"); f["granted"] != true || f["holder"] != sess.PublicKeyHex() || f["holder_name"] != "bob-editor" {
			t.Errorf("another repository's lock, as a session = %v", f)
		}
		a.send(map[string]any{"type": "list_locks", "_reqId": "l"})
		if locks, _ := a.next("lock_list")["locks"].([]any); len(locks) != 2 {
			t.Errorf("lock_list = %v", locks)
		}
		a.send(map[string]any{"type": "lock_renew", "key": "file:src/lib.rs", "repo": "r1", "fence_token": 1, "ttl_ms": 60000, "_reqId": "r"})
		if f := a.next("lock_result"); f["granted"] != true || f["_reqId"] != "r" {
			t.Errorf("renew = %v", f)
		}
		a.send(map[string]any{"type": "lock_release", "key": "file:src/lib.rs", "repo": "r1", "fence_token": 1, "_reqId": "x"})
		if f := a.next("lock_released"); f["released"] != true || f["_reqId"] != "x" {
			t.Errorf("lock_released = %v", f)
		}
		if f := b.next("lock_released"); f["key"] != "file:src/lib.rs" || f["repo"] != "r1" || f["_reqId"] != nil {
			t.Errorf("lock_released pushed = %v", f)
		}
		b.send(map[string]any{"type": "lock_acquire", "key": "file:src/lib.rs", "repo": "r1", "ttl_ms": 30000, "_reqId": "q4"})
		if f := b.next("lock_result"); f["granted"] != true || f["fence_token"] != float64(2) {
			t.Errorf("after the release = %v", f)
		}
		a.send(map[string]any{"type": "lock_renew", "key": "file:src/lib.rs", "repo": "r1", "fence_token": 1, "ttl_ms": 30000, "_reqId": "r2"})
		if f := a.next("error"); f["code"] != "lock_not_held" || f["_reqId"] != "r2" {
			t.Errorf("a stale renewal = %v", f)
		}
		for _, bad := range []struct {
			frame map[string]any
			code  string
		}{
			{map[string]any{"type": "lock_acquire", "key": "", "ttl_ms": 30000}, "invalid_lock_key"},
			{map[string]any{"type": "lock_acquire", "key": "k", "repo": "a\nb", "ttl_ms": 30000}, "invalid_lock_repo"},
			{map[string]any{"type": "lock_acquire", "key": "k", "ttl_ms": 5}, "invalid_lock_ttl"},
			{map[string]any{"type": "lock_renew", "key": "k", "fence_token": 0, "ttl_ms": 30000}, "invalid_fence_token"},
			{map[string]any{"type": "lock_release", "key": "k", "fence_token": -3}, "invalid_fence_token"},
		} {
			bad.frame["_reqId"] = "bad"
			a.send(bad.frame)
			if f := a.next("error"); f["code"] != bad.code || f["_reqId"] != "bad" {
				t.Errorf("%v: %v, want %s", bad.frame, f, bad.code)
			}
		}
		a.send(map[string]any{"type": "list_locks", "repo": "r1", "_reqId": "l2"})
		if locks, _ := a.next("lock_list")["locks"].([]any); len(locks) != 1 || locks[0].(map[string]any)["holder"] != sess.PublicKeyHex() {
			t.Errorf("lock_list of r1 = %v", locks)
		}
	})
}

// TestLockAcrossReplicas: two replicas on one PostgreSQL database grant a
// key once; a release on one is told to the other's connections; the
// holder, moved to the other replica, renews its lock.
func TestLockAcrossReplicas(t *testing.T) {
	url := brokertest.PostgresURL(t)
	first := startBroker(t, broker.Options{DatabaseURL: url}, noLimit)
	second := attachBroker(t, first, broker.Options{DatabaseURL: url})
	alice, bob := first.member("alice"), first.member("bob")
	a, b := first.connect(alice, "a"), second.connect(bob, "b")
	a.send(map[string]any{"type": "lock_acquire", "key": "deploy", "ttl_ms": 30000, "_reqId": "1"})
	if f := a.next("lock_result"); f["granted"] != true {
		t.Fatalf("first replica = %v", f)
	}
	b.send(map[string]any{"type": "lock_acquire", "key": "deploy", "ttl_ms": 30000, "_reqId": "2"})
	if f := b.next("lock_result"); f["granted"] != false || f["holder_name"] != "alice" {
		t.Errorf("second replica = %v", f)
	}
	w := second.connect(first.member("carol"), "w") // another replica's connection hears the release
	a.send(map[string]any{"type": "lock_release", "key": "deploy", "_reqId": "r"})
	a.next("lock_released")
	if f := w.next("lock_released"); f["key"] != "deploy" || f["_reqId"] != nil {
		t.Errorf("lock_released on the other replica = %v", f)
	}
	a.send(map[string]any{"type": "lock_acquire", "key": "deploy", "ttl_ms": 30000, "_reqId": "1b"})
	if f := a.next("lock_result"); f["granted"] != true || f["fence_token"] != float64(2) {
		t.Fatalf("taken again = %v", f)
	}
	a.ws.Close()
	a2 := second.connect(alice, "a2")
	a2.send(map[string]any{"type": "lock_renew", "key": "deploy", "fence_token": 2, "ttl_ms": 30000, "_reqId": "3"})
	if f := a2.next("lock_result"); f["granted"] != true || f["fence_token"] != float64(2) {
		t.Errorf("renewal through the other replica = %v", f)
	}
}
