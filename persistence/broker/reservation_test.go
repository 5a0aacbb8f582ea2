package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages/pathglob"
)

func reserve(repo string, exclusive bool, ttl time.Duration, patterns ...string) Reserve {
	return Reserve{Repo: repo, Patterns: patterns, Exclusive: exclusive, TTL: ttl, StaleAfter: time.Minute}
}

// TestReserveConflicts: an exclusive src/** refuses another holder's
// src/app.py exclusive and shared, naming holder, pattern, exclusivity,
// expiry and a path both cover; docs/*.md is granted beside it; shared
// beside shared is granted; an exclusive request is refused by a shared
// reservation; the holder's own reservations are never in its way; after
// the TTL the refused request is granted under a higher fence token.
func TestReserveConflicts(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		a, b, c := holderOf(e.join(t, m, "alice"), "alice"), holderOf(e.join(t, m, "bob"), "bob"), holderOf(e.join(t, m, "carol"), "carol")
		g, err := e.s.Reserve(ctx, m.ID, "", reserve("git:r", true, 10*time.Second, "src/**"), a)
		if err != nil || !g.Granted || g.Fence != 1 || len(g.Reservations) != 1 || g.Reservations[0].HolderName != "alice" {
			t.Fatalf("first grant = %+v, %v", g, err)
		}
		for _, excl := range []bool{true, false} {
			g, err := e.s.Reserve(ctx, m.ID, "", reserve("git:r", excl, 10*time.Second, "src/app.py"), b)
			if err != nil || g.Granted || len(g.Conflicts) != 1 {
				t.Fatalf("bob's src/app.py (exclusive %v) = %+v, %v; want refused", excl, g, err)
			}
			cf := g.Conflicts[0]
			if cf.HolderName != "alice" || cf.Pattern != "src/**" || !cf.Exclusive || cf.Yours != "src/app.py" || cf.Path != "src/app.py" ||
				!cf.ExpiresAt.Equal(e.clock.Now().Add(10*time.Second)) || cf.Stale {
				t.Errorf("conflict = %+v", cf)
			}
		}
		if g, err := e.s.Reserve(ctx, m.ID, "", reserve("git:r", true, 10*time.Second, "docs/*.md"), b); err != nil || !g.Granted || g.Fence != 2 {
			t.Fatalf("bob's docs/*.md = %+v, %v", g, err)
		}
		if g, err := e.s.Reserve(ctx, m.ID, "", reserve("git:r", true, 10*time.Second, "src/**", "docs/**"), a); err != nil || g.Granted ||
			len(g.Conflicts) != 1 || g.Conflicts[0].Yours != "docs/**" {
			t.Fatalf("alice's docs/** = %+v, %v; want refused by bob's docs/*.md alone", g, err)
		}
		if g, err := e.s.Reserve(ctx, m.ID, "", reserve("git:r", false, 10*time.Second, "lib/**"), a); err != nil || !g.Granted {
			t.Fatalf("alice's shared lib/** = %+v, %v", g, err)
		}
		if g, err := e.s.Reserve(ctx, m.ID, "", reserve("git:r", false, 10*time.Second, "lib/x.go"), c); err != nil || !g.Granted {
			t.Errorf("carol's shared lib/x.go beside a shared lib/** = %+v, %v", g, err)
		}
		if g, err := e.s.Reserve(ctx, m.ID, "", reserve("git:r", true, 10*time.Second, "lib/y.go"), b); err != nil || g.Granted ||
			len(g.Conflicts) != 1 || g.Conflicts[0].Exclusive {
			t.Errorf("bob's exclusive lib/y.go = %+v, %v; want refused by alice's shared lib/**", g, err)
		}
		if g, err := e.s.Reserve(ctx, m.ID, "", reserve("git:other", true, 10*time.Second, "src/app.py"), b); err != nil || !g.Granted || g.Fence != 1 {
			t.Errorf("another repository = %+v, %v", g, err)
		}
		list, err := e.s.Reservations(ctx, m.ID, "git:r")
		if err != nil || len(list) != 4 {
			t.Errorf("Reservations = %+v, %v", list, err)
		}
		e.clock.Advance(10 * time.Second)
		g, err = e.s.Reserve(ctx, m.ID, "", reserve("git:r", true, 10*time.Second, "src/app.py"), b)
		if err != nil || !g.Granted || g.Fence <= 2 {
			t.Errorf("after the TTL = %+v, %v; want granted with a fence above 2", g, err)
		}
	})
}

// TestReservationRenewRelease: renewals keep a grant past its TTL; another
// holder's renewal is refused; a release of some patterns leaves the rest;
// a release of none releases all; released reservations are no longer in
// anyone's way.
func TestReservationRenewRelease(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		a, b := holderOf(e.join(t, m, "alice"), "alice"), holderOf(e.join(t, m, "bob"), "bob")
		g, err := e.s.Reserve(ctx, m.ID, "", reserve("git:r", true, 3*time.Second, "src/**", "docs/**", "/Makefile"), a)
		if err != nil || !g.Granted {
			t.Fatal(g, err)
		}
		for range 4 {
			e.clock.Advance(2 * time.Second)
			if rs, err := e.s.RenewReservations(ctx, m.ID, "git:r", g.Fence, 3*time.Second, a); err != nil || len(rs) != 3 {
				t.Fatalf("renew = %+v, %v", rs, err)
			}
		}
		if _, err := e.s.RenewReservations(ctx, m.ID, "git:r", g.Fence, 3*time.Second, b); !errors.Is(err, ErrReservationNotHeld) {
			t.Errorf("bob renews alice's grant: %v", err)
		}
		if rel, err := e.s.ReleaseReservations(ctx, m.ID, "", "git:r", []string{"docs/**", "nothing/**"}, a); err != nil ||
			len(rel) != 1 || rel[0].Pattern != "docs/**" || rel[0].Fence != g.Fence {
			t.Errorf("release docs/** = %v, %v", rel, err)
		}
		if g, err := e.s.Reserve(ctx, m.ID, "", reserve("git:r", true, time.Minute, "docs/a.md"), b); err != nil || !g.Granted {
			t.Errorf("bob's docs/a.md after the release = %+v, %v", g, err)
		}
		if rel, err := e.s.ReleaseReservations(ctx, m.ID, "", "git:r", nil, a); err != nil || len(rel) != 2 {
			t.Errorf("release all = %v, %v", rel, err)
		}
		if _, err := e.s.RenewReservations(ctx, m.ID, "git:r", g.Fence, 3*time.Second, a); !errors.Is(err, ErrReservationNotHeld) {
			t.Errorf("renew after the release: %v", err)
		}
		e.clock.Advance(2 * time.Hour)
		if n, err := e.s.SweepReservations(ctx, e.clock.Now()); err != nil || n != 1 {
			t.Errorf("SweepReservations = %d, %v", n, err)
		}
	})
}

// TestReserveForce: a force releases the reservations of a holder that
// has not renewed for the threshold (all of its reservations in the
// repository) and is granted; the old holder's renewal is told who forced
// it; a holder that renews is never forced.
func TestReserveForce(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		a, b, c := holderOf(e.join(t, m, "alice"), "alice"), holderOf(e.join(t, m, "bob"), "bob"), holderOf(e.join(t, m, "carol"), "carol")
		ga, _ := e.s.Reserve(ctx, m.ID, "", reserve("git:r", true, time.Hour, "src/**", "docs/**"), a)
		gc, _ := e.s.Reserve(ctx, m.ID, "", reserve("git:r", true, time.Hour, "lib/**"), c)
		e.clock.Advance(30 * time.Second)
		req := reserve("git:r", true, time.Minute, "src/app.py")
		req.Force = true
		if g, err := e.s.Reserve(ctx, m.ID, "", req, b); err != nil || g.Granted || len(g.Forced) != 0 || g.Conflicts[0].Stale {
			t.Fatalf("force before the threshold = %+v, %v", g, err)
		}
		e.clock.Advance(31 * time.Second)
		if _, err := e.s.RenewReservations(ctx, m.ID, "git:r", gc.Fence, time.Hour, c); err != nil {
			t.Fatal(err)
		}
		req.Patterns = []string{"src/app.py", "lib/x.go"}
		g, err := e.s.Reserve(ctx, m.ID, "", req, b)
		if err != nil || g.Granted || len(g.Forced) != 0 || len(g.Conflicts) != 1 || g.Conflicts[0].HolderName != "carol" {
			t.Fatalf("force with carol renewing = %+v, %v; want refused by carol alone, nothing forced", g, err)
		}
		if list, _ := e.s.Reservations(ctx, m.ID, "git:r"); len(list) != 3 {
			t.Errorf("a refused force changed the reservations: %+v", list)
		}
		req.Patterns = []string{"src/app.py"}
		if g, err = e.s.Reserve(ctx, m.ID, "", req, b); err != nil || !g.Granted || len(g.Forced) != 2 || g.Fence != 3 {
			t.Fatalf("force past the threshold = %+v, %v; want granted, alice's two reservations forced", g, err)
		}
		_, err = e.s.RenewReservations(ctx, m.ID, "git:r", ga.Fence, time.Hour, a)
		if !errors.Is(err, ErrReservationNotHeld) || !strings.Contains(err.Error(), "bob forced") {
			t.Errorf("alice renews: %v; want not held, forced by bob", err)
		}
		if list, _ := e.s.Reservations(ctx, m.ID, "git:r"); len(list) != 2 {
			t.Errorf("after the force: %+v", list)
		}
	})
}

// TestCheckPaths: the guard's question — the paths another holder
// reserves exclusively, with the holder and pattern; shared reservations
// and the caller's own are not in the way.
func TestCheckPaths(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		a, b := holderOf(e.join(t, m, "alice"), "alice"), holderOf(e.join(t, m, "bob"), "bob")
		for _, r := range []Reserve{reserve("git:r", true, time.Minute, "src/**"), reserve("git:r", false, time.Minute, "docs/**")} {
			if g, err := e.s.Reserve(ctx, m.ID, "", r, a); err != nil || !g.Granted {
				t.Fatal(g, err)
			}
		}
		got, err := e.s.CheckPaths(ctx, m.ID, "git:r", []string{"README.md", "src/app.py", "docs/a.md", "src/lib/x.go"}, b)
		if err != nil || len(got) != 2 || got[0].Path != "src/app.py" || got[1].Path != "src/lib/x.go" || got[0].HolderName != "alice" ||
			got[0].Pattern != "src/**" {
			t.Errorf("bob's check = %+v, %v", got, err)
		}
		if got, err := e.s.CheckPaths(ctx, m.ID, "git:r", []string{"src/app.py"}, a); err != nil || len(got) != 0 {
			t.Errorf("alice's own check = %+v, %v", got, err)
		}
	})
}

// TestReservationBadInput: every invalid request is refused with its
// error, and nothing is stored; a revoked member is refused.
func TestReservationBadInput(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice := e.join(t, m, "alice")
		a := holderOf(alice, "alice")
		many := make([]string, 33)
		for i := range many {
			many[i] = fmt.Sprint("f", i)
		}
		for _, c := range []struct {
			r    Reserve
			want error
		}{
			{reserve("", true, time.Minute, "a"), ErrInvalidReservationRepo}, {reserve("a\nb", true, time.Minute, "a"), ErrInvalidReservationRepo},
			{reserve("r", true, time.Minute), ErrTooManyPatterns}, {reserve("r", true, time.Minute, many...), ErrTooManyPatterns},
			{reserve("r", true, time.Minute, "a//b"), ErrInvalidPattern}, {reserve("r", true, time.Minute, "!x"), ErrInvalidPattern},
			{reserve("r", true, time.Minute, "ok", "[a"), ErrInvalidPattern}, {reserve("r", true, time.Millisecond, "a"), ErrInvalidReservationTTL},
			{reserve("r", true, 2*time.Hour, "a"), ErrInvalidReservationTTL},
		} {
			if _, err := e.s.Reserve(ctx, m.ID, "", c.r, a); !errors.Is(err, c.want) || !errors.Is(err, ErrInvalid) {
				t.Errorf("Reserve(%+v): %v, want %v", c.r, err, c.want)
			}
		}
		if _, err := e.s.RenewReservations(ctx, m.ID, "r", 0, time.Minute, a); !errors.Is(err, ErrInvalidFence) {
			t.Errorf("renew with token 0: %v", err)
		}
		if _, err := e.s.ReleaseReservations(ctx, m.ID, "", "r", []string{"a//"}, a); !errors.Is(err, ErrInvalidPattern) {
			t.Errorf("release of a bad pattern: %v", err)
		}
		for _, paths := range [][]string{nil, {"/abs"}, {"a/../b"}, make([]string, 257)} {
			if _, err := e.s.CheckPaths(ctx, m.ID, "r", paths, a); !errors.Is(err, ErrInvalid) {
				t.Errorf("check %d paths: %v", len(paths), err)
			}
		}
		if n := e.count(t, "reservation") + e.count(t, "reservation_scope"); n != 0 {
			t.Errorf("%d rows stored", n)
		}
		if err := e.s.RevokeMember(ctx, m.ID, alice.Pubkey); err != nil {
			t.Fatal(err)
		}
		if _, err := e.s.Reserve(ctx, m.ID, "", reserve("r", true, time.Minute, "a"), a); !errors.Is(err, ErrMemberRevoked) {
			t.Errorf("revoked reserves: %v", err)
		}
	})
}

// TestReserveContended: many holders race for overlapping exclusive
// reservations of one repository (two stores on one PostgreSQL database,
// as two replicas; one SQLite store): no two granted reservations that
// stand together overlap, and every grant's fence token is distinct.
func TestReserveContended(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		stores := []*Store{e.s}
		if e.s.Backend() == postgresName {
			stores = append(stores, e.replica(t))
		}
		m := e.mesh(t, Mesh{})
		patterns := []string{"src/**", "src/app.py", "src/*.py", "**/*.py", "docs/**", "src/lib/**"}
		holders := make([]LockHolder, 40)
		for i := range holders {
			holders[i] = holderOf(e.join(t, m, fmt.Sprint("agent-", i)), fmt.Sprint("agent-", i))
		}
		for round := range 3 {
			var wg sync.WaitGroup
			var mu sync.Mutex
			fences := map[int64]bool{}
			for i, h := range holders {
				wg.Go(func() {
					g, err := stores[i%len(stores)].Reserve(ctx, m.ID, "", reserve("git:race", true, time.Minute, patterns[i%len(patterns)]), h)
					if err != nil {
						t.Error(err)
						return
					}
					if g.Granted {
						mu.Lock()
						if fences[g.Fence] {
							t.Errorf("fence %d granted twice", g.Fence)
						}
						fences[g.Fence] = true
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			list, err := e.s.Reservations(ctx, m.ID, "git:race")
			if err != nil || len(list) == 0 {
				t.Fatalf("round %d: %+v, %v", round, list, err)
			}
			for i := range list {
				for j := i + 1; j < len(list); j++ {
					if list[i].Holder != list[j].Holder && overlapText(t, list[i].Pattern, list[j].Pattern) {
						t.Fatalf("round %d: %s's %s and %s's %s were both granted", round, list[i].HolderName, list[i].Pattern,
							list[j].HolderName, list[j].Pattern)
					}
				}
			}
			e.clock.Advance(time.Minute) // nobody renews: every reservation runs out
		}
	})
}

func overlapText(t *testing.T, a, b string) bool {
	t.Helper()
	pa, errA := pathglob.Parse(a)
	pb, errB := pathglob.Parse(b)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	_, ok := pathglob.Overlap(pa, pb)
	return ok
}
