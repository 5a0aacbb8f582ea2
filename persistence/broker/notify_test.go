package broker

import (
	"context"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// TestAcceptNotifiesWaiting: on PostgreSQL an accept's transaction NOTIFYs
// the recipients of the messages it created that the accepting broker does
// not push to (not Online) — a recipient online here is not announced, and
// a duplicate announces nothing — and a release of leases NOTIFYs the
// recipients whose rows it freed.
func TestAcceptNotifiesWaiting(t *testing.T) {
	e := openEnv(t, Options{DatabaseURL: brokertest.PostgresURL(t)})
	m := e.mesh(t, Mesh{})
	alice, bob, carol := e.join(t, m, "alice"), e.join(t, m, "bob"), e.join(t, m, "carol")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan []Recipient, 16)
	listening := make(chan struct{})
	go func() {
		_ = e.s.Listen(ctx, func(rs []Recipient) {
			if rs == nil { // (re)connected: from here on nothing is missed
				close(listening)
				return
			}
			var ours []Recipient // the channel is the database's: other tests notify on it too
			for _, r := range rs {
				if r.MeshID == m.ID {
					ours = append(ours, r)
				}
			}
			if ours != nil {
				got <- ours
			}
		})
	}()
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not connect")
	}
	next := func() []Recipient {
		t.Helper()
		select {
		case rs := <-got:
			return rs
		case <-time.After(10 * time.Second):
			t.Fatal("no notification within 10 s")
			return nil
		}
	}

	toBob := dm(m, alice, bob, "n-1", "hello")
	toCarol := dm(m, alice, carol, "n-2", "hello")
	toCarol.Online = []string{carol.Pubkey} // pushed by the accepting broker
	if res := e.accept(t, toBob, toCarol); res[0].Outcome != Created || res[1].Outcome != Created {
		t.Fatalf("accept: %+v", res)
	}
	if rs := next(); len(rs) != 1 || rs[0] != (Recipient{MeshID: m.ID, Pubkey: bob.Pubkey}) {
		t.Fatalf("notified %+v, want bob alone", rs)
	}
	// A duplicate creates nothing and announces nothing: the next
	// notification is the new message's.
	again := dm(m, alice, bob, "n-1", "hello")
	toCarolNow := dm(m, alice, carol, "n-3", "hello")
	if res := e.accept(t, again, toCarolNow); res[0].Outcome != Duplicate || res[1].Outcome != Created {
		t.Fatalf("accept: %+v", res)
	}
	if rs := next(); len(rs) != 1 || rs[0] != (Recipient{MeshID: m.ID, Pubkey: carol.Pubkey}) {
		t.Fatalf("notified %+v, want carol alone", rs)
	}
	// Freeing leases announces their recipients; freeing none announces
	// nothing (the next notification is the one after it).
	if ds, err := e.s.ClaimDeliveries(ctx, Claim{MeshID: m.ID, RecipientPubkeys: []string{bob.Pubkey}, Lease: time.Hour, Limit: 10}); err != nil || len(ds) != 1 {
		t.Fatalf("claim: %v, %d rows", err, len(ds))
	}
	if n, err := e.s.ReleaseRecipientLeases(ctx, m.ID, []string{alice.Pubkey}); err != nil || n != 0 {
		t.Fatalf("release alice (nothing leased): %d, %v", n, err)
	}
	if n, err := e.s.ReleaseRecipientLeases(ctx, m.ID, []string{bob.Pubkey}); err != nil || n != 1 {
		t.Fatalf("release bob: %d, %v", n, err)
	}
	if rs := next(); len(rs) != 1 || rs[0] != (Recipient{MeshID: m.ID, Pubkey: bob.Pubkey}) {
		t.Fatalf("notified %+v, want bob alone", rs)
	}
}
