package broker

import (
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// noStateChange fails when c received a state_change: it asks for the
// state list, which comes after anything pushed to c before it.
func noStateChange(t *testing.T, c *client, why string) {
	t.Helper()
	c.send(map[string]any{"type": "list_state", "_reqId": "fence"})
	c.next("state_list")
	for _, f := range c.seen {
		if f["type"] == "state_change" {
			t.Errorf("%s: got %v", why, f)
		}
	}
}

// TestStateFrames: set_state answers the sender nothing (with _reqId:
// state_set and the version) and pushes state_change to every other
// connection of the mesh, another connection of the sender's member
// included; get_state and list_state answer in upstream's shapes with the
// version; a missing key is value null and "" strings.
func TestStateFrames(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a, a2, b := e.connect(alice, "a"), e.connect(alice, "a2"), e.connect(bob, "b")

		a.send(map[string]any{"type": "set_state", "key": "release", "value": map[string]any{"owner": "alice"}})
		for _, c := range []*client{b, a2} {
			f := c.next("state_change")
			if f["key"] != "release" || f["value"].(map[string]any)["owner"] != "alice" || f["updatedBy"] != "alice" ||
				f["updatedByPubkey"] != alice.id.PublicKeyHex() || f["version"] != float64(1) || f["updatedAt"] == "" {
				t.Errorf("state_change = %v", f)
			}
		}
		noStateChange(t, a, "the sender")

		b.send(map[string]any{"type": "set_state", "key": "release", "value": "bob", "_reqId": "s-1"})
		if f := b.next("state_set"); f["_reqId"] != "s-1" || f["key"] != "release" || f["version"] != float64(2) {
			t.Errorf("state_set = %v", f)
		}
		if f := a.next("state_change"); f["value"] != "bob" || f["version"] != float64(2) || f["updatedBy"] != "bob" {
			t.Errorf("state_change of bob's set = %v", f)
		}

		a.send(map[string]any{"type": "get_state", "key": "release", "_reqId": "g-1"})
		if f := a.next("state_result"); f["_reqId"] != "g-1" || f["key"] != "release" || f["value"] != "bob" ||
			f["updatedBy"] != "bob" || f["version"] != float64(2) || f["updatedAt"] == "" {
			t.Errorf("state_result = %v", f)
		}
		a.send(map[string]any{"type": "get_state", "key": "nope", "_reqId": "g-2"})
		if f := a.next("state_result"); f["_reqId"] != "g-2" || f["key"] != "nope" || f["value"] != nil ||
			f["updatedBy"] != "" || f["updatedAt"] != "" || f["version"] != float64(0) {
			t.Errorf("state_result of a missing key = %v", f)
		}
		b.send(map[string]any{"type": "set_state", "key": "build", "value": "red"})
		a.next("state_change")
		a.send(map[string]any{"type": "list_state", "_reqId": "l-1"})
		f := a.next("state_list")
		entries, _ := f["entries"].([]any)
		if f["_reqId"] != "l-1" || len(entries) != 2 {
			t.Fatalf("state_list = %v", f)
		}
		if first := entries[0].(map[string]any); first["key"] != "build" || first["value"] != "red" || first["version"] != float64(1) {
			t.Errorf("first entry = %v", first)
		}
	})
}

// TestStateCompareAndSet: a set_state with if_version that does not match
// is an error frame state_conflict under its _reqId with the key as it is;
// nothing is stored and nothing pushed.
func TestStateCompareAndSet(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a, b := e.connect(alice, "a"), e.connect(bob, "b")
		a.send(map[string]any{"type": "set_state", "key": "n", "value": 1, "if_version": 0, "_reqId": "c-1"})
		if f := a.next("state_set"); f["version"] != float64(1) {
			t.Fatalf("create = %v", f)
		}
		b.next("state_change")
		b.send(map[string]any{"type": "set_state", "key": "n", "value": 5, "if_version": 0, "_reqId": "c-2"})
		f := b.next("error")
		state, _ := f["state"].(map[string]any)
		if f["code"] != "state_conflict" || f["_reqId"] != "c-2" || state["version"] != float64(1) || state["value"] != float64(1) {
			t.Errorf("conflict = %v", f)
		}
		b.send(map[string]any{"type": "set_state", "key": "n", "value": 2, "if_version": 1, "_reqId": "c-3"})
		if f := b.next("state_set"); f["version"] != float64(2) {
			t.Errorf("replace = %v", f)
		}
		if f := a.next("state_change"); f["value"] != float64(2) {
			t.Errorf("state_change = %v (the refused set must push nothing)", f)
		}
	})
}

// TestStateRefusals: each malformed set_state is an error frame with its
// own code under the request's _reqId; nothing is stored or pushed.
func TestStateRefusals(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a, b := e.connect(alice, "a"), e.connect(bob, "b")
		for _, tc := range []struct {
			frame map[string]any
			code  string
		}{
			{map[string]any{"key": "", "value": 1}, "invalid_state_key"},
			{map[string]any{"key": strings.Repeat("k", broker.MaxStateKey+1), "value": 1}, "invalid_state_key"},
			{map[string]any{"key": "k"}, "invalid_state_value"},
			{map[string]any{"key": "k", "value": strings.Repeat("v", broker.MaxStateValue)}, "state_value_too_large"},
			{map[string]any{"key": "k", "value": 1, "if_version": -1}, "invalid_if_version"},
		} {
			tc.frame["type"], tc.frame["_reqId"] = "set_state", "bad"
			a.send(tc.frame)
			if f := a.next("error"); f["code"] != tc.code || f["_reqId"] != "bad" || f["message"] == "" {
				t.Errorf("%.60v: %v, want %s", tc.frame, f, tc.code)
			}
		}
		a.send(map[string]any{"type": "set_state", "key": 5, "value": 1})
		if f := a.next("error"); f["code"] == "" {
			t.Errorf("a number key: %v", f)
		}
		if n, err := e.store.States(t.Context(), e.mesh.ID); err != nil || len(n) != 0 {
			t.Errorf("stored %v, %v; want nothing", n, err)
		}
		noStateChange(t, b, "a refused set")
	})
}

// TestStateAcrossReplicas: a set on one replica reaches a connection of the
// mesh on the other as state_change, once.
func TestStateAcrossReplicas(t *testing.T) {
	url := brokertest.PostgresURL(t)
	first := startBroker(t, broker.Options{DatabaseURL: url}, noLimit)
	second := attachBroker(t, first, broker.Options{DatabaseURL: url})
	alice, bob := first.member("alice"), first.member("bob")
	a, b := first.connect(alice, "a"), second.connect(bob, "b") // each broker's start waited for its LISTEN
	a.send(map[string]any{"type": "set_state", "key": "build", "value": "red"})
	if f := b.next("state_change"); f["key"] != "build" || f["value"] != "red" || f["updatedBy"] != "alice" || f["version"] != float64(1) {
		t.Errorf("state_change on the other replica = %v", f)
	}
	b.send(map[string]any{"type": "set_state", "key": "build", "value": "green", "_reqId": "s"})
	b.next("state_set")
	if f := a.next("state_change"); f["value"] != "green" || f["version"] != float64(2) {
		t.Errorf("state_change back on the first replica = %v", f)
	}
	noStateChange(t, a, "the first replica, once")
	noStateChange(t, b, "the sender, through the other replica")
}

// TestStateRevokedMember: a member revoked while connected can set nothing:
// its set_state is refused revoked (by the store, or by the broker closing
// the connection first) and nothing is stored or pushed.
func TestStateRevokedMember(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a, b := e.connect(alice, "a"), e.connect(bob, "b")
		if err := e.store.RevokeMember(t.Context(), e.mesh.ID, bob.id.PublicKeyHex()); err != nil {
			t.Fatal(err)
		}
		b.send(map[string]any{"type": "set_state", "key": "k", "value": 1, "_reqId": "s"})
		if f := b.next("error"); f["code"] != "revoked" {
			t.Errorf("bob's set after his revocation: %v, want revoked", f)
		}
		if n, err := e.store.States(t.Context(), e.mesh.ID); err != nil || len(n) != 0 {
			t.Errorf("stored %v, %v; want nothing", n, err)
		}
		noStateChange(t, a, "a revoked member's set")
	})
}
