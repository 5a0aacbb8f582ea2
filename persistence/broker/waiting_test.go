package broker

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestWaitingRecipients: the relay poll's look finds the recipients whose
// rows became claimable in its window and are claimable still — created
// unleased, or with a lease that ran out or was released — and says
// whether one of their rows has priority "now"; rows created leased,
// claimed, delivered or outside the window are not reported.
func TestWaitingRecipients(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob, carol, dave, erin := e.join(t, m, "alice"), e.join(t, m, "bob"), e.join(t, m, "carol"),
			e.join(t, m, "dave"), e.join(t, m, "erin")
		look := func(after, until time.Time) []Waiting {
			t.Helper()
			ws, err := e.s.WaitingRecipients(ctx, after, until)
			if err != nil {
				t.Fatal(err)
			}
			return slices.DeleteFunc(ws, func(w Waiting) bool { return w.MeshID != m.ID })
		}
		want := func(got []Waiting, want ...Waiting) {
			t.Helper()
			slices.SortFunc(want, func(a, b Waiting) int {
				if a.Pubkey < b.Pubkey {
					return -1
				}
				return 1
			})
			if !slices.Equal(got, want) {
				t.Fatalf("waiting %+v, want %+v", got, want)
			}
		}
		start := e.clock.Now()
		toBob := dm(m, alice, bob, "w-1", "hello")     // unleased: bob is at another replica, or offline
		toCarol := dm(m, alice, carol, "w-2", "hello") // pushed at the accept: leased
		toCarol.Online, toCarol.Lease = []string{carol.Pubkey}, time.Minute
		toDave := dm(m, alice, dave, "w-3", "hello")
		toDave.Priority = "now"
		e.accept(t, toBob, toCarol, toDave)
		e.clock.Advance(time.Second)
		toErin := dm(m, alice, erin, "w-4", "hello") // a second later
		e.accept(t, toErin)
		e.clock.Advance(time.Second)

		want(look(start.Add(-time.Second), start), Waiting{Recipient{m.ID, bob.Pubkey}, false},
			Waiting{Recipient{m.ID, dave.Pubkey}, true})
		want(look(start, start.Add(time.Second)), Waiting{Recipient{m.ID, erin.Pubkey}, false})
		want(look(start.Add(time.Second), e.clock.Now())) // nothing became claimable since

		// Claimed: no longer waiting, until its lease runs out.
		if ds, err := e.s.ClaimDeliveries(ctx, Claim{MeshID: m.ID, RecipientPubkeys: []string{bob.Pubkey}, Lease: 10 * time.Second, Limit: 10}); err != nil || len(ds) != 1 {
			t.Fatalf("claim bob: %v, %d rows", err, len(ds))
		}
		want(look(start.Add(-time.Second), start), Waiting{Recipient{m.ID, dave.Pubkey}, true})
		leased := e.clock.Now()
		e.clock.Advance(time.Minute)
		want(look(leased, e.clock.Now()), Waiting{Recipient{m.ID, bob.Pubkey}, false}, Waiting{Recipient{m.ID, carol.Pubkey}, false})

		// Delivered: never waiting again.
		if n, err := e.s.AckDeliveries(ctx, []Ack{{MeshID: m.ID, RecipientPubkeys: []string{bob.Pubkey}, ClientMessageID: "w-1"}}); err != nil || n != 1 {
			t.Fatalf("ack bob: %d, %v", n, err)
		}
		want(look(leased, e.clock.Now()), Waiting{Recipient{m.ID, carol.Pubkey}, false})

		// Released: waiting from the release on.
		if ds, err := e.s.ClaimDeliveries(ctx, Claim{MeshID: m.ID, RecipientPubkeys: []string{erin.Pubkey}, Lease: time.Hour, Limit: 10}); err != nil || len(ds) != 1 {
			t.Fatalf("claim erin: %v, %d rows", err, len(ds))
		}
		before := e.clock.Now()
		e.clock.Advance(time.Second)
		if n, err := e.s.ReleaseRecipientLeases(ctx, m.ID, []string{erin.Pubkey}); err != nil || n != 1 {
			t.Fatalf("release erin: %d, %v", n, err)
		}
		if n, err := e.s.ReleaseRecipientLeases(ctx, m.ID, []string{erin.Pubkey}); err != nil || n != 0 {
			t.Fatalf("release erin again (no live lease left): %d, %v", n, err)
		}
		want(look(before, e.clock.Now()), Waiting{Recipient{m.ID, erin.Pubkey}, false})
	})
}
