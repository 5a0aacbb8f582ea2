package persistence

import (
	"slices"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestHeldReservations: a session's grant is kept and read back by its
// route with its patterns; a release of part of it narrows it; a loss
// forgets it; a member's grant is audited
// but not kept; abandoning a route forgets its grants beside its locks;
// each transition is one audit entry, and the chain verifies.
func TestHeldReservations(t *testing.T) {
	o := openTestOutbox(t)
	record := func(m messages.RecordReservation) {
		t.Helper()
		if err := run(t, o.DB, func(tx *Tx) error { return o.RecordReservation(tx, &m) }); err != nil {
			t.Fatal(err)
		}
	}
	held := func(route string) []messages.HeldReservation {
		t.Helper()
		var grants []messages.HeldReservation
		if err := run(t, o.DB, func(tx *Tx) (err error) { grants, err = o.HeldReservations(tx, route); return err }); err != nil {
			t.Fatal(err)
		}
		return grants
	}
	sess := messages.RecordReservation{Route: "demo/s1", Mesh: "mesh-1", Holder: "pk-s1", Repo: "git:abc", Fence: 3,
		Patterns: []string{"src/**", "docs/*.md"}, TTL: time.Minute, Kind: messages.LockKindAcquired, Keep: true, Now: 1000}
	record(sess)
	other := sess
	other.Fence, other.Patterns = 5, []string{"lib/**"}
	record(other)
	member := messages.RecordReservation{Route: "demo", Mesh: "mesh-1", Holder: "pk-m", Repo: "git:abc", Fence: 4,
		Patterns: []string{"Makefile"}, TTL: time.Minute, Kind: messages.LockKindAcquired, Now: 1000}
	record(member)
	if got := held("demo/s1"); len(got) != 2 || got[0].Fence != 3 || !slices.Equal(got[0].Patterns, sess.Patterns) ||
		got[0].TTL != time.Minute || got[0].Repo != "git:abc" || got[0].Mesh != "mesh-1" {
		t.Fatalf("held = %+v", got)
	}
	if got := held("demo"); len(got) != 0 {
		t.Errorf("a member's grant kept: %+v", got)
	}
	part := sess // one of its two patterns released: the grant keeps the other
	part.Kind, part.Patterns, part.Remaining = messages.LockKindReleased, []string{"docs/*.md"}, []string{"src/**"}
	record(part)
	if got := held("demo/s1"); len(got) != 2 || got[0].Fence != 3 || !slices.Equal(got[0].Patterns, []string{"src/**"}) {
		t.Fatalf("after releasing part of it = %+v", got)
	}
	lost := sess
	lost.Kind, lost.Patterns = messages.LockKindLost, []string{"src/**"}
	record(lost)
	if got := held("demo/s1"); len(got) != 1 || got[0].Fence != 5 {
		t.Fatalf("after the loss = %+v", got)
	}
	if err := run(t, o.DB, func(tx *Tx) error { return o.AbandonHeldLocks(tx, "demo/s1") }); err != nil {
		t.Fatal(err)
	}
	if got := held("demo/s1"); len(got) != 0 {
		t.Errorf("after abandoning = %+v", got)
	}
	want := "reservation.acquired git:abc\nreservation.acquired git:abc\nreservation.acquired git:abc\nreservation.released git:abc\n" +
		"reservation.lost git:abc\n" +
		"reservation.abandoned git:abc\n"
	if got := kinds(auditLog(t, o)); got != want {
		t.Errorf("audit log:\n%s\nwant:\n%s", got, want)
	}
	if err := verify(t, o); err != nil {
		t.Error(err)
	}
}
