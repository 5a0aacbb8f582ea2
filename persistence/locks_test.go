package persistence

import (
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestHeldLocks: a session's acquired lock is kept and read back by its
// route; a release forgets it; a member's lock is audited but not kept;
// abandoning a route forgets its locks; each transition is one audit
// entry, and the chain verifies.
func TestHeldLocks(t *testing.T) {
	o := openTestOutbox(t)
	record := func(m messages.RecordLock) {
		t.Helper()
		if err := run(t, o.DB, func(tx *Tx) error { return o.RecordLock(tx, &m) }); err != nil {
			t.Fatal(err)
		}
	}
	held := func(route string) []messages.HeldLock {
		t.Helper()
		var locks []messages.HeldLock
		if err := run(t, o.DB, func(tx *Tx) (err error) { locks, err = o.HeldLocks(tx, route); return err }); err != nil {
			t.Fatal(err)
		}
		return locks
	}
	sess := messages.RecordLock{Route: "demo/s1", Mesh: "mesh-1", Holder: "pk-s1", Repo: "git:abc", Key: "file:a.go", Fence: 3,
		TTL: 30 * time.Second, Kind: messages.LockKindAcquired, Keep: true, Now: 1000}
	record(sess)
	other := sess
	other.Key, other.Fence = "file:b.go", 4
	record(other)
	member := messages.RecordLock{Route: "demo", Mesh: "mesh-1", Holder: "pk-m", Key: "deploy", Fence: 9, TTL: time.Second,
		Kind: messages.LockKindAcquired, Now: 1000}
	record(member)
	if got := held("demo/s1"); len(got) != 2 || got[0].Key != "file:a.go" || got[0].Fence != 3 || got[0].TTL != 30*time.Second ||
		got[0].Repo != "git:abc" || got[0].Mesh != "mesh-1" {
		t.Fatalf("held = %+v", got)
	}
	if got := held("demo"); len(got) != 0 {
		t.Errorf("a member's lock kept: %+v", got)
	}
	released := sess
	released.Kind, released.TTL = messages.LockKindReleased, 0
	record(released)
	if got := held("demo/s1"); len(got) != 1 || got[0].Key != "file:b.go" {
		t.Fatalf("after the release = %+v", got)
	}
	if err := run(t, o.DB, func(tx *Tx) error { return o.AbandonHeldLocks(tx, "demo/s1") }); err != nil {
		t.Fatal(err)
	}
	if got := held("demo/s1"); len(got) != 0 {
		t.Errorf("after abandoning = %+v", got)
	}
	want := "lock.acquired file:a.go\nlock.acquired file:b.go\nlock.acquired deploy\nlock.released file:a.go\nlock.abandoned file:b.go\n"
	if got := kinds(auditLog(t, o)); got != want {
		t.Errorf("audit log:\n%s\nwant:\n%s", got, want)
	}
	if err := verify(t, o); err != nil {
		t.Error(err)
	}
}
