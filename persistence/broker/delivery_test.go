package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestDeliveryLease: a DM to an offline member is a queued row; a claim
// leases it, with its sender's display name (which the live push takes from
// the sender's connection), a second claim does not see it until the lease
// expires, and an ack removes it for good.
func TestDeliveryLease(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		req := dm(m, alice, bob, "lease-1", "ciphertext==")
		req.ReplyToID, req.Meta = "01PREVIOUS", []byte(`{"a":"x","b":1}`)
		res := e.accept(t, req)[0]
		if res.Outcome != Created {
			t.Fatalf("accept: %d (%v)", res.Outcome, res.Err)
		}
		acceptedAt := e.clock.Now()
		claim := Claim{MeshID: m.ID, RecipientPubkeys: []string{bob.Pubkey}, Lease: 30 * time.Second, Limit: 10}

		e.clock.Advance(time.Hour) // bob was offline for an hour
		got, err := e.s.ClaimDeliveries(ctx, claim)
		if err != nil || len(got) != 1 {
			t.Fatalf("claim = %d rows, %v; want 1", len(got), err)
		}
		d := got[0]
		want := Delivery{DeliveryID: d.DeliveryID, MeshID: m.ID, RecipientPubkey: bob.Pubkey,
			BrokerMessageID: res.BrokerMessageID, ClientMessageID: "lease-1", RequestFingerprint: req.RequestFingerprint,
			SenderPubkey: alice.Pubkey, SenderName: "alice", TargetSpec: bob.Pubkey, Priority: "next", Nonce: req.Nonce,
			Ciphertext: "ciphertext==", ReplyToID: "01PREVIOUS", Meta: req.Meta, CreatedAt: acceptedAt,
			HistoryID: res.HistoryID, Attempts: 1, LeaseExpiresAt: e.clock.Now().Add(30 * time.Second)}
		if fmt.Sprint(d) != fmt.Sprint(want) {
			t.Errorf("delivery\n got %+v\nwant %+v", d, want)
		}

		steps := []struct {
			name    string
			advance time.Duration
			want    int
		}{
			{"lease held", 0, 0},
			{"lease nearly over", 29 * time.Second, 0},
			{"lease expired", time.Second, 1},
		}
		for _, s := range steps {
			e.clock.Advance(s.advance)
			got, err := e.s.ClaimDeliveries(ctx, claim)
			if err != nil || len(got) != s.want {
				t.Fatalf("%s: claim = %d rows, %v; want %d", s.name, len(got), err, s.want)
			}
			if s.want == 1 && got[0].Attempts != 2 {
				t.Errorf("%s: attempts %d, want 2", s.name, got[0].Attempts)
			}
		}
	})
}

// TestDeliveryAck: an ack by client_message_id or broker_message_id marks
// the recipient's row delivered, once; another recipient's ack does not.
func TestDeliveryAck(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		res := e.accept(t, dm(m, alice, bob, "lease-1", "x"))[0]
		claim := Claim{MeshID: m.ID, RecipientPubkeys: []string{bob.Pubkey}, Lease: 30 * time.Second, Limit: 10}
		acks := []struct {
			name            string
			cmid, bmid      string
			recipients      []string
			wantAcked       int64
			wantClaimableTo int
		}{
			{"someone else's ack", "lease-1", "", []string{alice.Pubkey}, 0, 1},
			{"ack by client_message_id", "lease-1", "", []string{bob.Pubkey}, 1, 0},
			{"ack again by broker_message_id", "", res.BrokerMessageID, []string{bob.Pubkey}, 0, 0},
		}
		for _, a := range acks {
			n, err := e.s.AckDeliveries(ctx, []Ack{{MeshID: m.ID, RecipientPubkeys: a.recipients,
				ClientMessageID: a.cmid, BrokerMessageID: a.bmid}})
			if err != nil || n != a.wantAcked {
				t.Errorf("%s: acked %d, %v; want %d", a.name, n, err, a.wantAcked)
			}
			e.clock.Advance(time.Minute)
			if got, err := e.s.ClaimDeliveries(ctx, claim); err != nil || len(got) != a.wantClaimableTo {
				t.Errorf("%s: then claim = %d rows, %v; want %d", a.name, len(got), err, a.wantClaimableTo)
			}
		}
	})
}

// TestAcceptLeasesOnline: rows of recipients marked online are created
// leased, as if claimed; the others are claimable at once. Acks batch.
func TestAcceptLeasesOnline(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob, carol := e.join(t, m, "alice"), e.join(t, m, "bob"), e.join(t, m, "carol")
		var reqs []*AcceptRequest
		for _, id := range []string{"on-1", "on-2"} {
			reqs = append(reqs, &AcceptRequest{MeshID: m.ID, ClientMessageID: id, RequestFingerprint: fingerprint(id),
				DestinationKind: KindTopic, DestinationRef: "*", SenderPubkey: alice.Pubkey, TargetSpec: "*",
				Priority: "next", Nonce: "n", Ciphertext: "c", Recipients: []string{bob.Pubkey, carol.Pubkey},
				Online: []string{bob.Pubkey}, Lease: 30 * time.Second})
		}
		for _, r := range e.accept(t, reqs...) {
			if r.Outcome != Created {
				t.Fatalf("accept: %d (%v)", r.Outcome, r.Err)
			}
		}
		claim := func(who *Member) []Delivery {
			t.Helper()
			got, err := e.s.ClaimDeliveries(ctx, Claim{MeshID: m.ID, RecipientPubkeys: []string{who.Pubkey}, Lease: time.Minute, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		if got := claim(bob); len(got) != 0 {
			t.Errorf("bob's leased rows were claimable: %d", len(got))
		}
		if got := claim(carol); len(got) != 2 {
			t.Errorf("carol (offline) has %d claimable rows, want 2", len(got))
		}
		if got, err := e.s.ExpiredLeases(ctx, e.clock.Now(), e.clock.Now().Add(30*time.Second)); err != nil ||
			fmt.Sprint(got) != fmt.Sprint([]Recipient{{m.ID, bob.Pubkey}}) {
			t.Errorf("ExpiredLeases = %v, %v; want bob", got, err)
		}
		e.clock.Advance(30 * time.Second)
		got := claim(bob)
		if len(got) != 2 || got[0].Attempts != 2 {
			t.Fatalf("after the accept lease: %+v, want 2 rows at attempt 2", got)
		}
		n, err := e.s.AckDeliveries(ctx, []Ack{
			{MeshID: m.ID, RecipientPubkeys: []string{bob.Pubkey}, ClientMessageID: "on-1"},
			{MeshID: m.ID, RecipientPubkeys: []string{bob.Pubkey}, BrokerMessageID: got[1].BrokerMessageID},
			{MeshID: m.ID, RecipientPubkeys: []string{carol.Pubkey}, ClientMessageID: "on-2"},
			{MeshID: m.ID, RecipientPubkeys: []string{carol.Pubkey}},
		})
		if err != nil || n != 3 {
			t.Errorf("AckDeliveries = %d, %v; want 3", n, err)
		}
		if n := e.count(t, "delivery_queue WHERE delivered_at IS NULL"); n != 1 {
			t.Errorf("%d undelivered rows, want 1 (carol's on-1)", n)
		}
	})
}

// TestDeliveryClaimFilters: a claim sees only its recipients, its mesh,
// the priority it asks for, and at most its limit, oldest first.
func TestDeliveryClaimFilters(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m, other := e.mesh(t, Mesh{}), e.mesh(t, Mesh{})
		alice, bob, carol := e.join(t, m, "alice"), e.join(t, m, "bob"), e.join(t, m, "carol")
		var reqs []*AcceptRequest
		for i, p := range []string{"now", "next", "low", "now"} {
			r := dm(m, alice, bob, fmt.Sprintf("f-%d", i), "x")
			r.Priority = p
			reqs = append(reqs, r)
		}
		reqs = append(reqs, dm(m, alice, carol, "f-carol", "x"))
		for _, r := range e.accept(t, reqs...) {
			if r.Outcome != Created {
				t.Fatalf("accept: %d (%v)", r.Outcome, r.Err)
			}
		}
		cases := []struct {
			name  string
			claim Claim
			want  []string
		}{
			{"other mesh", Claim{MeshID: other.ID, RecipientPubkeys: []string{bob.Pubkey}}, nil},
			{"nobody's key", Claim{MeshID: m.ID, RecipientPubkeys: []string{newPubkey(t)}}, nil},
			{"only now", Claim{MeshID: m.ID, RecipientPubkeys: []string{bob.Pubkey}, OnlyNow: true}, []string{"f-0", "f-3"}},
			{"limit", Claim{MeshID: m.ID, RecipientPubkeys: []string{bob.Pubkey}, Limit: 1}, []string{"f-1"}},
			{"two keys", Claim{MeshID: m.ID, RecipientPubkeys: []string{bob.Pubkey, carol.Pubkey}}, []string{"f-2", "f-carol"}},
		}
		for _, c := range cases {
			c.claim.Lease = time.Minute
			if c.claim.Limit == 0 {
				c.claim.Limit = 100
			}
			got, err := e.s.ClaimDeliveries(ctx, c.claim)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			var ids []string
			for _, d := range got {
				ids = append(ids, d.ClientMessageID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(c.want) {
				t.Errorf("%s: claimed %v, want %v", c.name, ids, c.want)
			}
		}
	})
}

// TestExpiredLeases: the redelivery timer learns which recipients have
// rows whose lease ran out, and when to wake next.
func TestExpiredLeases(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob, carol := e.join(t, m, "alice"), e.join(t, m, "bob"), e.join(t, m, "carol")
		e.accept(t, dm(m, alice, bob, "x-1", "x"), dm(m, alice, carol, "x-2", "x"), dm(m, bob, alice, "x-3", "x"))
		t0 := e.clock.Now()
		if _, ok, err := e.s.NextLeaseExpiry(ctx, t0); ok || err != nil {
			t.Fatalf("NextLeaseExpiry with no leases: %v, %v", ok, err)
		}
		claim := func(who *Member, lease time.Duration) {
			if _, err := e.s.ClaimDeliveries(ctx, Claim{MeshID: m.ID, RecipientPubkeys: []string{who.Pubkey}, Lease: lease, Limit: 10}); err != nil {
				t.Fatal(err)
			}
		}
		claim(bob, 10*time.Second)
		claim(carol, 20*time.Second)
		if _, err := e.s.AckDeliveries(ctx, []Ack{{MeshID: m.ID, RecipientPubkeys: []string{carol.Pubkey}, ClientMessageID: "x-2"}}); err != nil {
			t.Fatal(err)
		}
		next, ok, err := e.s.NextLeaseExpiry(ctx, t0)
		if err != nil || !ok || !next.Equal(t0.Add(10*time.Second)) {
			t.Errorf("NextLeaseExpiry = %v, %v, %v; want %v", next, ok, err, t0.Add(10*time.Second))
		}
		cases := []struct {
			name         string
			after, until time.Time
			want         []Recipient
		}{
			{"before expiry", t0, t0.Add(9 * time.Second), nil},
			{"bob expired", t0, t0.Add(10 * time.Second), []Recipient{{m.ID, bob.Pubkey}}},
			{"already reported", t0.Add(10 * time.Second), t0.Add(time.Minute), nil},
		}
		for _, c := range cases {
			got, err := e.s.ExpiredLeases(ctx, c.after, c.until)
			if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("%s: %v, %v; want %v (acked and never-claimed rows are not reported)", c.name, got, err, c.want)
			}
		}
		if _, ok, err := e.s.NextLeaseExpiry(ctx, t0.Add(10*time.Second)); ok || err != nil {
			t.Errorf("NextLeaseExpiry after the last lease: %v, %v", ok, err)
		}
	})
}

// TestConcurrentClaimers: two claimers racing over one recipient's rows
// (two replicas on PostgreSQL) never get the same row, and together get
// every row.
func TestConcurrentClaimers(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		const rows = 300
		var reqs []*AcceptRequest
		for i := range rows {
			reqs = append(reqs, dm(m, alice, bob, fmt.Sprintf("c-%03d", i), "x"))
		}
		for _, r := range e.accept(t, reqs...) {
			if r.Outcome != Created {
				t.Fatalf("accept: %d (%v)", r.Outcome, r.Err)
			}
		}
		claimers := []*Store{e.s, e.replica(t)}
		claimed := make([][]string, len(claimers))
		var wg sync.WaitGroup
		for i, s := range claimers {
			wg.Go(func() {
				for {
					got, err := s.ClaimDeliveries(context.Background(),
						Claim{MeshID: m.ID, RecipientPubkeys: []string{bob.Pubkey}, Lease: time.Hour, Limit: 7})
					if err != nil {
						t.Error(err)
						return
					}
					if len(got) == 0 {
						return
					}
					for _, d := range got {
						claimed[i] = append(claimed[i], d.ClientMessageID)
					}
				}
			})
		}
		wg.Wait()
		seen := map[string]int{}
		for i := range claimed {
			for _, id := range claimed[i] {
				seen[id]++
				if seen[id] > 1 {
					t.Errorf("row %s claimed twice", id)
				}
			}
		}
		if len(seen) != rows {
			t.Errorf("%d rows claimed, want %d", len(seen), rows)
		}
	})
}

// TestAckRelaxed: acks commit without fsync on SQLite, and leave the
// writer connection back at synchronous=FULL for the next accept.
func TestAckRelaxed(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		r := e.accept(t, dm(m, alice, bob, "w-1", "x"))
		if r[0].Outcome != Created {
			t.Fatalf("accept w-1: %d (%v)", r[0].Outcome, r[0].Err)
		}
		ack := Ack{MeshID: m.ID, RecipientPubkeys: []string{bob.Pubkey}, BrokerMessageID: r[0].BrokerMessageID}
		if n, err := e.s.AckDeliveries(ctx, []Ack{ack, ack}); n != 1 || err != nil {
			t.Fatalf("AckDeliveries = %d, %v; want 1", n, err)
		}
		if e.s.Backend() == "sqlite" {
			var mode int
			if err := e.s.db.GetContext(ctx, &mode, "PRAGMA synchronous"); err != nil || mode != 2 {
				t.Errorf("synchronous after acks = %d, %v; want 2 (FULL)", mode, err)
			}
		}
		if r = e.accept(t, dm(m, alice, bob, "w-2", "y")); r[0].Outcome != Created {
			t.Fatalf("accept after acks: %d (%v)", r[0].Outcome, r[0].Err)
		}
	})
}
