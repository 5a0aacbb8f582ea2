package broker

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

func ifVersion(v int64) *int64 { return &v }

// TestStateSetGetList: a key starts at version 1 and grows by one per set,
// the value is stored compact, who set it last is kept, and the list is by
// key and per mesh.
func TestStateSetGetList(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m, other := e.mesh(t, Mesh{}), e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")

		got, err := e.s.SetState(ctx, m.ID, "", StateSet{Key: "release", Value: json.RawMessage(`{ "owner" : "alice" }`),
			MemberID: alice.ID, UpdatedBy: alice.Pubkey, UpdatedByName: "alice"})
		if err != nil || got.Version != 1 || string(got.Value) != `{"owner":"alice"}` {
			t.Fatalf("first set = %+v, %v", got, err)
		}
		e.clock.Advance(time.Second)
		if got, err = e.s.SetState(ctx, m.ID, "", StateSet{Key: "release", Value: json.RawMessage(`"bob"`),
			MemberID: bob.ID, UpdatedBy: bob.Pubkey, UpdatedByName: "bob"}); err != nil || got.Version != 2 {
			t.Fatalf("second set = %+v, %v", got, err)
		}
		if _, err := e.s.SetState(ctx, m.ID, "", StateSet{Key: "build", Value: json.RawMessage(`null`), MemberID: bob.ID, UpdatedBy: bob.Pubkey}); err != nil {
			t.Fatal(err)
		}
		read, err := e.s.State(ctx, m.ID, "release")
		if err != nil || read.Version != 2 || string(read.Value) != `"bob"` || read.UpdatedBy != bob.Pubkey ||
			read.UpdatedByName != "bob" || !read.UpdatedAt.Equal(e.clock.Now().Truncate(time.Millisecond)) {
			t.Errorf("State = %+v, %v", read, err)
		}
		if _, err := e.s.State(ctx, m.ID, "nope"); !errors.Is(err, ErrStateNotFound) {
			t.Errorf("State of a missing key: %v, want ErrStateNotFound", err)
		}
		if _, err := e.s.State(ctx, other.ID, "release"); !errors.Is(err, ErrStateNotFound) {
			t.Errorf("another mesh sees the key: %v", err)
		}
		list, err := e.s.States(ctx, m.ID)
		if err != nil || len(list) != 2 || list[0].Key != "build" || string(list[0].Value) != "null" || list[1].Key != "release" {
			t.Errorf("States = %+v, %v", list, err)
		}
		if list, _ := e.s.States(ctx, other.ID); len(list) != 0 {
			t.Errorf("States of another mesh = %+v", list)
		}
	})
}

// TestStateCompareAndSet: if_version 0 creates only, N replaces version N
// only; a mismatch is a *StateConflict with the key as it is, and stores
// nothing.
func TestStateCompareAndSet(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice := e.join(t, m, "alice")
		set := func(value string, v *int64) (*StateEntry, error) {
			return e.s.SetState(ctx, m.ID, "", StateSet{Key: "n", Value: json.RawMessage(value), IfVersion: v, MemberID: alice.ID, UpdatedBy: alice.Pubkey})
		}
		var conflict *StateConflict
		if _, err := set(`1`, ifVersion(1)); !errors.As(err, &conflict) || conflict.Current != nil || !errors.Is(err, ErrStateConflict) {
			t.Fatalf("if_version 1 on a missing key: %v, want a conflict with no current", err)
		}
		if got, err := set(`1`, ifVersion(0)); err != nil || got.Version != 1 {
			t.Fatalf("create = %+v, %v", got, err)
		}
		if _, err := set(`9`, ifVersion(0)); !errors.As(err, &conflict) || conflict.Current.Version != 1 || string(conflict.Current.Value) != "1" {
			t.Fatalf("create of an existing key: %v", err)
		}
		if got, err := set(`2`, ifVersion(1)); err != nil || got.Version != 2 {
			t.Fatalf("replace version 1 = %+v, %v", got, err)
		}
		if _, err := set(`9`, ifVersion(1)); !errors.As(err, &conflict) || conflict.Current.Version != 2 ||
			!strings.Contains(err.Error(), "version 2, not 1") {
			t.Fatalf("stale replace: %v", err)
		}
		if read, _ := e.s.State(ctx, m.ID, "n"); read.Version != 2 || string(read.Value) != "2" {
			t.Errorf("after the refused sets: %+v", read)
		}
	})
}

// TestStateConcurrentIncrements: writers reading and compare-and-setting
// one key lose no update.
func TestStateConcurrentIncrements(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice := e.join(t, m, "alice")
		const writers, each = 4, 25
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for range writers {
			wg.Go(func() {
				for done := 0; done < each; {
					n, version := int64(0), int64(0)
					if cur, err := e.s.State(ctx, m.ID, "counter"); err == nil {
						_ = json.Unmarshal(cur.Value, &n)
						version = cur.Version
					}
					value, _ := json.Marshal(n + 1)
					_, err := e.s.SetState(ctx, m.ID, "", StateSet{Key: "counter", Value: value, IfVersion: &version, MemberID: alice.ID, UpdatedBy: alice.Pubkey})
					switch {
					case errors.Is(err, ErrStateConflict):
					case err != nil:
						errs <- err
						return
					default:
						done++
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if cur, err := e.s.State(ctx, m.ID, "counter"); err != nil || string(cur.Value) != "100" || cur.Version != writers*each {
			t.Errorf("counter = %+v, %v; want 100 at version 100", cur, err)
		}
	})
}

// TestStateRefusals: each malformed set is refused with its own error and
// stores nothing.
func TestStateRefusals(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice := e.join(t, m, "alice")
		big := `"` + strings.Repeat("x", MaxStateValue) + `"`
		for _, tc := range []struct {
			name string
			set  StateSet
			want error
		}{
			{"empty key", StateSet{Value: json.RawMessage(`1`)}, ErrInvalidStateKey},
			{"long key", StateSet{Key: strings.Repeat("k", MaxStateKey+1), Value: json.RawMessage(`1`)}, ErrInvalidStateKey},
			{"control key", StateSet{Key: "a\nb", Value: json.RawMessage(`1`)}, ErrInvalidStateKey},
			{"bad utf-8 key", StateSet{Key: "a\xffb", Value: json.RawMessage(`1`)}, ErrInvalidStateKey},
			{"no value", StateSet{Key: "k"}, ErrInvalidStateValue},
			{"not json", StateSet{Key: "k", Value: json.RawMessage(`{nope`)}, ErrInvalidStateValue},
			{"two values", StateSet{Key: "k", Value: json.RawMessage(`1 2`)}, ErrInvalidStateValue},
			{"too large", StateSet{Key: "k", Value: json.RawMessage(big)}, ErrStateValueTooLarge},
			{"negative if_version", StateSet{Key: "k", Value: json.RawMessage(`1`), IfVersion: ifVersion(-1)}, ErrInvalidIfVersion},
		} {
			tc.set.MemberID, tc.set.UpdatedBy = alice.ID, alice.Pubkey
			if _, err := e.s.SetState(ctx, m.ID, "", tc.set); !errors.Is(err, tc.want) || !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			}
		}
		fits := `"` + strings.Repeat("x", MaxStateValue-2) + `"`
		if got, err := e.s.SetState(ctx, m.ID, "", StateSet{Key: "k", Value: json.RawMessage(fits), MemberID: alice.ID, UpdatedBy: alice.Pubkey}); err != nil ||
			got.Version != 1 {
			t.Fatalf("a value of exactly the cap: %v", err)
		}
		if n := e.count(t, "state WHERE mesh_id = ?", m.ID); n != 1 {
			t.Errorf("%d rows stored, want only the one that fits", n)
		}
	})
}

// TestStateRevokedMember: a revoked member's set, whatever its form,
// stores nothing and is ErrMemberRevoked, not a conflict.
func TestStateRevokedMember(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		if _, err := e.s.SetState(ctx, m.ID, "", StateSet{Key: "k", Value: json.RawMessage(`1`), MemberID: alice.ID, UpdatedBy: alice.Pubkey}); err != nil {
			t.Fatal(err)
		}
		if err := e.s.RevokeMember(ctx, m.ID, bob.Pubkey); err != nil {
			t.Fatal(err)
		}
		for _, v := range []*int64{nil, ifVersion(0), ifVersion(1)} {
			for _, key := range []string{"k", "new"} {
				_, err := e.s.SetState(ctx, m.ID, "", StateSet{Key: key, Value: json.RawMessage(`2`), IfVersion: v, MemberID: bob.ID, UpdatedBy: bob.Pubkey})
				if !errors.Is(err, ErrMemberRevoked) {
					t.Errorf("revoked set of %s (if_version %v): %v, want ErrMemberRevoked", key, v, err)
				}
			}
		}
		if list, _ := e.s.States(ctx, m.ID); len(list) != 1 || list[0].Version != 1 || string(list[0].Value) != "1" {
			t.Errorf("state after the revoked sets: %+v", list)
		}
	})
}

// TestStateNotifiesOtherReplicas: on PostgreSQL a committed set is
// announced with its origin, its value inline or, too large for a
// notification, read back; a refused compare-and-set announces nothing.
func TestStateNotifiesOtherReplicas(t *testing.T) {
	e := openEnv(t, Options{DatabaseURL: brokertest.PostgresURL(t)})
	m := e.mesh(t, Mesh{})
	alice := e.join(t, m, "alice")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan *StateChange, 16)
	listening := make(chan struct{})
	go func() {
		_ = e.s.ListenState(ctx, func() { close(listening) }, func(c *StateChange) {
			if c.MeshID == m.ID { // the channel is the database's: other tests notify on it too
				got <- c
			}
		})
	}()
	next := func() *StateChange {
		t.Helper()
		select {
		case c := <-got:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("no state notification within 10 s")
			return nil
		}
	}
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not connect")
	}
	big := json.RawMessage(`"` + strings.Repeat("y", 20000) + `"`)
	if _, err := e.s.SetState(ctx, m.ID, "r1", StateSet{Key: "big", Value: big, MemberID: alice.ID, UpdatedBy: alice.Pubkey, UpdatedByName: "alice"}); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Origin != "r1" || c.Entry.Key != "big" || c.Entry.Version != 1 || string(c.Entry.Value) != string(big) ||
		c.Entry.UpdatedByName != "alice" {
		t.Errorf("large change = %+v", c)
	}
	if _, err := e.s.SetState(ctx, m.ID, "r2", StateSet{Key: "big", Value: json.RawMessage(`1`), IfVersion: ifVersion(7),
		MemberID: alice.ID, UpdatedBy: alice.Pubkey}); !errors.Is(err, ErrStateConflict) {
		t.Fatal(err)
	}
	if _, err := e.s.SetState(ctx, m.ID, "r2", StateSet{Key: "small", Value: json.RawMessage(`{"a":1}`), MemberID: alice.ID, UpdatedBy: alice.Pubkey}); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Origin != "r2" || c.Entry.Key != "small" || string(c.Entry.Value) != `{"a":1}` {
		t.Errorf("small change = %+v (the refused set must announce nothing)", c)
	}
}
