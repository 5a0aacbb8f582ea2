package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func holderOf(m *Member, name string) LockHolder {
	return LockHolder{Pubkey: m.Pubkey, Name: name, MemberID: m.ID}
}

// TestLockGrantExtendExpire: a free key is granted with token 1; its
// holder asking again extends it under the same token; another is refused
// with the holder's lock; after the TTL the other is granted token 2 at
// once, with no sweep.
func TestLockGrantExtendExpire(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		a, b := holderOf(alice, "alice"), holderOf(bob, "bob")

		l, ok, err := e.s.AcquireLock(ctx, m.ID, "", "file:src/lib.rs", 10*time.Second, a)
		if err != nil || !ok || l.Fence != 1 || l.Holder != alice.Pubkey || l.HolderName != "alice" {
			t.Fatalf("first acquire = %+v, %v, %v", l, ok, err)
		}
		e.clock.Advance(5 * time.Second)
		if l, ok, err = e.s.AcquireLock(ctx, m.ID, "", "file:src/lib.rs", 10*time.Second, a); err != nil || !ok || l.Fence != 1 ||
			!l.ExpiresAt.Equal(e.clock.Now().Add(10*time.Second)) {
			t.Fatalf("the holder again = %+v, %v, %v; want token 1, extended", l, ok, err)
		}
		held, ok, err := e.s.AcquireLock(ctx, m.ID, "", "file:src/lib.rs", 10*time.Second, b)
		if err != nil || ok || held.Holder != alice.Pubkey || held.Fence != 1 || !held.ExpiresAt.Equal(l.ExpiresAt) {
			t.Fatalf("another = %+v, %v, %v; want refused with alice's lock", held, ok, err)
		}
		e.clock.Advance(10 * time.Second)
		if l, ok, err = e.s.AcquireLock(ctx, m.ID, "", "file:src/lib.rs", 10*time.Second, b); err != nil || !ok || l.Fence != 2 ||
			l.Holder != bob.Pubkey {
			t.Fatalf("after the TTL = %+v, %v, %v; want bob with token 2", l, ok, err)
		}
		if _, err := e.s.RenewLock(ctx, m.ID, "", "file:src/lib.rs", 1, 10*time.Second, a); !errors.Is(err, ErrLockNotHeld) {
			t.Errorf("the stale holder renews: %v, want ErrLockNotHeld", err)
		}
	})
}

// TestLockScopes: the same key in two repositories, or two meshes, are
// two locks.
func TestLockScopes(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m, other := e.mesh(t, Mesh{}), e.mesh(t, Mesh{})
		alice, bob, carol := e.join(t, m, "alice"), e.join(t, m, "bob"), e.join(t, other, "carol")
		for _, c := range []struct {
			mesh string
			repo string
			who  LockHolder
		}{{m.ID, "repo-a", holderOf(alice, "alice")}, {m.ID, "repo-b", holderOf(bob, "bob")}, {m.ID, "", holderOf(bob, "bob")},
			{other.ID, "repo-a", holderOf(carol, "carol")}} {
			if l, ok, err := e.s.AcquireLock(ctx, c.mesh, c.repo, "file:src/lib.rs", time.Minute, c.who); err != nil || !ok || l.Fence != 1 {
				t.Errorf("acquire in %s/%q = %+v, %v, %v", c.mesh, c.repo, l, ok, err)
			}
		}
		locks, err := e.s.Locks(ctx, m.ID, "", true)
		if err != nil || len(locks) != 3 || locks[0].Repo != "" || locks[1].Repo != "repo-a" || locks[2].Repo != "repo-b" {
			t.Errorf("Locks(all) = %+v, %v", locks, err)
		}
		if locks, err := e.s.Locks(ctx, m.ID, "repo-b", false); err != nil || len(locks) != 1 || locks[0].Holder != bob.Pubkey {
			t.Errorf("Locks(repo-b) = %+v, %v", locks, err)
		}
	})
}

// TestLockRenewRelease: a renewal moves the expiry; a release frees the
// lock for the next holder under a new token; a release of a lock not held
// (or under another token) changes nothing and says so.
func TestLockRenewRelease(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		a, b := holderOf(alice, "alice"), holderOf(bob, "bob")
		l, _, err := e.s.AcquireLock(ctx, m.ID, "r", "k", 2*time.Second, a)
		if err != nil {
			t.Fatal(err)
		}
		for range 5 { // held well past the first TTL by renewals alone
			e.clock.Advance(1500 * time.Millisecond)
			if l, err = e.s.RenewLock(ctx, m.ID, "r", "k", l.Fence, 2*time.Second, a); err != nil {
				t.Fatalf("renew: %v", err)
			}
		}
		if _, err := e.s.RenewLock(ctx, m.ID, "r", "k", l.Fence, 2*time.Second, b); !errors.Is(err, ErrLockNotHeld) {
			t.Errorf("another renews: %v", err)
		}
		if held, err := e.s.ReleaseLock(ctx, m.ID, "", "r", "k", l.Fence+1, a); err != nil || held != 0 {
			t.Errorf("release under another token = %v, %v", held, err)
		}
		if held, err := e.s.ReleaseLock(ctx, m.ID, "", "r", "k", 0, b); err != nil || held != 0 {
			t.Errorf("release by another = %v, %v", held, err)
		}
		if held, err := e.s.ReleaseLock(ctx, m.ID, "", "r", "k", l.Fence, a); err != nil || held != l.Fence {
			t.Errorf("release = %v, %v", held, err)
		}
		if held, err := e.s.ReleaseLock(ctx, m.ID, "", "r", "k", l.Fence, a); err != nil || held != 0 {
			t.Errorf("release again = %v, %v; want 0", held, err)
		}
		if l, ok, err := e.s.AcquireLock(ctx, m.ID, "r", "k", time.Second, b); err != nil || !ok || l.Fence != 2 {
			t.Errorf("after the release = %+v, %v, %v", l, ok, err)
		}
		if locks, _ := e.s.Locks(ctx, m.ID, "", true); len(locks) != 1 || locks[0].Holder != bob.Pubkey {
			t.Errorf("Locks = %+v", locks)
		}
		e.clock.Advance(time.Second)
		if n, err := e.s.SweepLocks(ctx, e.clock.Now()); err != nil || n != 1 {
			t.Errorf("SweepLocks = %d, %v", n, err)
		}
		if locks, _ := e.s.Locks(ctx, m.ID, "", true); len(locks) != 0 {
			t.Errorf("Locks after the sweep = %+v", locks)
		}
		if l, ok, err := e.s.AcquireLock(ctx, m.ID, "r", "k", time.Second, a); err != nil || !ok || l.Fence != 3 {
			t.Errorf("after the sweep = %+v, %v, %v; want token 3 (never reused)", l, ok, err)
		}
	})
}

// TestLockBadInputAndRevoked: invalid keys, repositories, TTLs and tokens
// are refused with their errors; a revoked member is refused; nothing is
// stored.
func TestLockBadInputAndRevoked(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice := e.join(t, m, "alice")
		a := holderOf(alice, "alice")
		long := string(make([]byte, 513))
		for _, c := range []struct {
			repo, key string
			ttl       time.Duration
			want      error
		}{{"", "", time.Second, ErrInvalidLockKey}, {"", "a\x00b", time.Second, ErrInvalidLockKey}, {"", long, time.Second, ErrInvalidLockKey},
			{"\n", "k", time.Second, ErrInvalidLockRepo}, {"", "k", time.Millisecond, ErrInvalidLockTTL}, {"", "k", 2 * time.Hour, ErrInvalidLockTTL}} {
			if _, _, err := e.s.AcquireLock(ctx, m.ID, c.repo, c.key, c.ttl, a); !errors.Is(err, c.want) || !errors.Is(err, ErrInvalid) {
				t.Errorf("acquire %q/%q/%v: %v, want %v", c.repo, c.key, c.ttl, err, c.want)
			}
		}
		if _, err := e.s.RenewLock(ctx, m.ID, "", "k", 0, time.Second, a); !errors.Is(err, ErrInvalidFence) {
			t.Errorf("renew with token 0: %v", err)
		}
		if _, err := e.s.ReleaseLock(ctx, m.ID, "", "", "k", -1, a); !errors.Is(err, ErrInvalidFence) {
			t.Errorf("release with token -1: %v", err)
		}
		if n := e.count(t, "mesh_lock"); n != 0 {
			t.Errorf("%d rows stored", n)
		}
		l, _, err := e.s.AcquireLock(ctx, m.ID, "", "k", time.Minute, a)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.s.RevokeMember(ctx, m.ID, alice.Pubkey); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.s.AcquireLock(ctx, m.ID, "", "k2", time.Minute, a); !errors.Is(err, ErrMemberRevoked) {
			t.Errorf("revoked acquires: %v", err)
		}
		if _, err := e.s.RenewLock(ctx, m.ID, "", "k", l.Fence, time.Minute, a); !errors.Is(err, ErrMemberRevoked) {
			t.Errorf("revoked renews: %v", err)
		}
	})
}

// TestLockContended: 50 acquirers of one key at once (two stores on one
// PostgreSQL database, as two replicas; one SQLite store) — exactly one is
// granted, and each later holder's token is greater than the one before.
func TestLockContended(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		stores := []*Store{e.s}
		if e.s.Backend() == postgresName {
			stores = append(stores, e.replica(t))
		}
		m := e.mesh(t, Mesh{})
		holders := make([]LockHolder, 50)
		for i := range holders {
			holders[i] = holderOf(e.join(t, m, fmt.Sprint("agent-", i)), fmt.Sprint("agent-", i))
		}
		last := int64(0)
		for round := range 3 {
			var wg sync.WaitGroup
			var mu sync.Mutex
			var granted []*Lock
			for i, h := range holders {
				wg.Go(func() {
					l, ok, err := stores[i%len(stores)].AcquireLock(ctx, m.ID, "", "release-branch", time.Minute, h)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						mu.Lock()
						granted = append(granted, l)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if len(granted) != 1 {
				t.Fatalf("round %d: %d granted, want 1", round, len(granted))
			}
			if granted[0].Fence <= last {
				t.Fatalf("round %d: token %d after %d", round, granted[0].Fence, last)
			}
			last = granted[0].Fence
			e.clock.Advance(time.Minute) // the holder stops renewing: the lock runs out
		}
	})
}
