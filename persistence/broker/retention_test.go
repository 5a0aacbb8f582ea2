package broker

import (
	"context"
	"testing"
	"time"
)

// TestSweepDedupe: the sweep deletes exactly the expired rows, never a
// permanent mesh's, and a swept id is free again.
func TestSweepDedupe(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		short, long, forever := e.mesh(t, Mesh{DedupeRetentionDays: 3}), e.mesh(t, Mesh{DedupeRetentionDays: 30}),
			e.mesh(t, Mesh{DedupeMode: DedupePermanent})
		senders := map[*Mesh]*Member{}
		for _, m := range []*Mesh{short, long, forever} {
			alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
			senders[m] = alice
			if r := e.accept(t, dm(m, alice, bob, "sw", "x"))[0]; r.Outcome != Created {
				t.Fatalf("accept: %d (%v)", r.Outcome, r.Err)
			}
		}
		t0 := e.clock.Now()
		day := 24 * time.Hour
		steps := []struct {
			name      string
			now       time.Time
			deleted   int64
			remaining []*Mesh
		}{
			{"nothing expired", t0.Add(3 * day), 0, []*Mesh{short, long, forever}},
			{"3-day row expired", t0.Add(3*day + time.Millisecond), 1, []*Mesh{long, forever}},
			{"sweep again", t0.Add(4 * day), 0, []*Mesh{long, forever}},
			{"30-day row expired", t0.Add(1000 * day), 1, []*Mesh{forever}},
		}
		for _, s := range steps {
			n, err := e.s.SweepDedupe(ctx, s.now)
			if err != nil || n != s.deleted {
				t.Fatalf("%s: deleted %d, %v; want %d", s.name, n, err, s.deleted)
			}
			if got := e.count(t, "client_message_dedupe"); got != len(s.remaining) {
				t.Errorf("%s: %d rows left, want %d", s.name, got, len(s.remaining))
			}
			for _, m := range s.remaining {
				if row, err := e.s.LookupDedupe(ctx, m.ID, senders[m].Pubkey, "sw"); row == nil || err != nil {
					t.Errorf("%s: mesh %s lost its row (%v)", s.name, m.Slug, err)
				}
			}
		}
		alice, bob := e.join(t, short, "alice2"), e.join(t, short, "bob2")
		if r := e.accept(t, dm(short, alice, bob, "sw", "other body"))[0]; r.Outcome != Created {
			t.Errorf("swept id: %d (%v), want Created", r.Outcome, r.Err)
		}
	})
}

// TestPruneAndOrphans: pruning deletes messages with their history and
// delivery rows and flips history_available; the orphan check finds
// nothing after normal operation and finds a deliberate orphan.
func TestPruneAndOrphans(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		old := e.accept(t, dm(m, alice, bob, "old", "x"))[0]
		e.clock.Advance(time.Hour)
		cutoff := e.clock.Now()
		recent := e.accept(t, dm(m, alice, bob, "recent", "x"), dm(m, alice, bob, "orphan", "x"))
		if old.Outcome != Created || recent[0].Outcome != Created || recent[1].Outcome != Created {
			t.Fatalf("accept: %+v %+v", old, recent)
		}
		if o, err := e.s.OrphanCheck(ctx); err != nil || o != (Orphans{}) {
			t.Fatalf("OrphanCheck after accepts = %+v, %v", o, err)
		}

		n, err := e.s.PruneMessages(ctx, cutoff)
		if err != nil || n != 1 {
			t.Fatalf("PruneMessages = %d, %v; want 1", n, err)
		}
		for from, want := range map[string]int{
			"message": 2, "message_history": 2, "delivery_queue": 2,
			"client_message_dedupe": 3, "client_message_dedupe WHERE history_available = FALSE": 1,
		} {
			if got := e.count(t, from); got != want {
				t.Errorf("after prune: %d rows in %s, want %d", got, from, want)
			}
		}
		dup := e.accept(t, dm(m, alice, bob, "old", "x"))[0]
		if dup.Outcome != Duplicate || dup.HistoryAvailable || dup.BrokerMessageID != old.BrokerMessageID || dup.HistoryID != "" {
			t.Errorf("retry of a pruned message: %+v, want Duplicate with history_available false", dup)
		}
		if o, err := e.s.OrphanCheck(ctx); err != nil || o != (Orphans{}) {
			t.Errorf("OrphanCheck after prune = %+v, %v", o, err)
		}

		if _, err := e.s.db.Exec(e.s.d.rewrite("DELETE FROM message WHERE id = ?"), recent[1].BrokerMessageID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.s.db.Exec(e.s.d.rewrite("DELETE FROM client_message_dedupe WHERE client_message_id = ?"), "recent"); err != nil {
			t.Fatal(err)
		}
		if o, err := e.s.OrphanCheck(ctx); err != nil || o != (Orphans{Dedupe: 1, History: 1}) {
			t.Errorf("OrphanCheck after deliberate orphans = %+v, %v; want 1 and 1", o, err)
		}
	})
}

// TestPruneBoundary: retention finds messages by id, a ULID of created_at,
// and prunes exactly those created before the cutoff, to the millisecond
// (a cutoff within a millisecond rounds up: a message of that millisecond
// was created before it), and those of one millisecond in accept order.
func TestPruneBoundary(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		created := e.clock.Now()
		first := e.accept(t, dm(m, alice, bob, "b-1", "x"), dm(m, alice, bob, "b-2", "x"))
		second := e.accept(t, dm(m, alice, bob, "b-3", "x"))
		if !(first[0].BrokerMessageID < first[1].BrokerMessageID && first[1].BrokerMessageID < second[0].BrokerMessageID) {
			t.Fatalf("ids of one millisecond out of accept order: %s %s %s", first[0].BrokerMessageID, first[1].BrokerMessageID,
				second[0].BrokerMessageID)
		}
		e.clock.Advance(time.Minute)
		e.accept(t, dm(m, alice, bob, "b-later", "x"))
		for _, c := range []struct {
			cutoff time.Time
			want   int64
		}{{created, 0}, {created.Add(500 * time.Microsecond), 3}, {created.Add(time.Minute), 0}, {created.Add(time.Hour), 1}} {
			if n, err := e.s.PruneMessages(ctx, c.cutoff); err != nil || n != c.want {
				t.Errorf("PruneMessages(created %+v) = %d, %v; want %d", c.cutoff.Sub(created), n, err, c.want)
			}
		}
	})
}
