package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// TestReserveFindsConflictsByPrefix: a request is compared only with the
// reservations whose prefix meets its own, and every overlap is still
// found — a reservation of a directory of the request, one within it, one
// that can cover a path anywhere, and one written before prefixes were
// (an empty prefix).
func TestReserveFindsConflictsByPrefix(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		a, b := holderOf(e.join(t, m, "alice"), "alice"), holderOf(e.join(t, m, "bob"), "bob")
		for _, p := range []string{"src/**", "lib/a/b.go", "*.md", "docs/x/**", "tools/gen/**"} {
			if g, err := e.s.Reserve(ctx, m.ID, "", reserve("git:r", true, time.Minute, p), a); err != nil || !g.Granted {
				t.Fatalf("alice's %s = %+v, %v", p, g, err)
			}
		}
		// alice's tools/gen/** as an older broker wrote it.
		if _, err := e.s.db.ExecContext(ctx, e.s.d.rewrite(`UPDATE reservation SET prefix = '' WHERE pattern = ?`), "tools/gen/**"); err != nil {
			t.Fatal(err)
		}
		for pattern, want := range map[string][]string{
			"src/app/x.go":     {"src/**"},             // within a reservation's directory
			"lib/**":           {"*.md", "lib/a/b.go"}, // a reservation within the request's, and one anywhere
			"docs/README.md":   {"*.md"},               // anywhere
			"docs/x/y/z.txt":   {"docs/x/**"},          // deeper still
			"tools/gen/a.go":   {"tools/gen/**"},       // a row of an older broker
			"libs/b.go":        nil,                    // lib is not libs
			"docs/y/a.txt":     nil,
			"{src,bin}/main.c": {"src/**"},
		} {
			g, err := e.s.Reserve(ctx, m.ID, "", reserve("git:r", true, time.Minute, pattern), b)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range g.Conflicts {
				got = append(got, c.Pattern)
			}
			if !slices.Equal(got, want) || g.Granted != (len(want) == 0) {
				t.Errorf("bob's %s: conflicts %q (granted %v), want %q", pattern, got, g.Granted, want)
			}
		}
	})
}

// TestReservationsPerMember: a member holds at most
// MaxReservationsPerMember reservations in one repository, its sessions'
// counted with its own; a pattern reserved again counts once, and another
// repository or member has its own count.
func TestReservationsPerMember(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		member := e.join(t, m, "alice")
		a := holderOf(member, "alice")
		session := LockHolder{Pubkey: newPubkey(t), Name: "alice-session", MemberID: member.ID}
		holdMany(t, e, m.ID, "git:r", a, 0, 990)
		holdMany(t, e, m.ID, "git:r", session, 990, 10)
		if _, err := e.s.Reserve(ctx, m.ID, "", reserve("git:r", false, time.Minute, "more/x"), session); !errors.Is(err, ErrTooManyReservations) {
			t.Fatalf("a reservation past the bound: %v, want ErrTooManyReservations", err)
		}
		if g, err := e.s.Reserve(ctx, m.ID, "", reserve("git:r", false, time.Minute, "p/0", "p/1"), a); err != nil || !g.Granted {
			t.Errorf("alice reserving again what she holds: %+v, %v", g, err)
		}
		if g, err := e.s.Reserve(ctx, m.ID, "", reserve("git:other", false, time.Minute, "more/x"), a); err != nil || !g.Granted {
			t.Errorf("another repository: %+v, %v", g, err)
		}
		b := holderOf(e.join(t, m, "bob"), "bob")
		if g, err := e.s.Reserve(ctx, m.ID, "", reserve("git:r", false, time.Minute, "more/x"), b); err != nil || !g.Granted {
			t.Errorf("another member: %+v, %v", g, err)
		}
	})
}

// holdMany gives who n shared reservations p/<from>…p/<from+n-1> of repo,
// in grants of the most patterns a request takes.
func holdMany(t testing.TB, e *env, meshID, repo string, who LockHolder, from, n int) {
	t.Helper()
	for i := from; i < from+n; {
		var patterns []string
		for ; i < from+n && len(patterns) < 32; i++ {
			patterns = append(patterns, fmt.Sprintf("p/%d", i))
		}
		if g, err := e.s.Reserve(context.Background(), meshID, "", reserve(repo, false, time.Hour, patterns...), who); err != nil || !g.Granted {
			t.Fatalf("reserve %d patterns: %+v, %v", len(patterns), g, err)
		}
	}
}

// BenchmarkReserveBeside: another member's reserve in a repository where
// ten members hold the bound each (10,000 reservations), none of them in
// its way: the time of one grant and its release.
func BenchmarkReserveBeside(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			opts := Options{Dir: b.TempDir()}
			if backend == "postgres" {
				opts = Options{DatabaseURL: brokertest.PostgresURL(b)}
			}
			e := openEnv(b, opts)
			m := e.mesh(b, Mesh{})
			for i := range 10 {
				holdMany(b, e, m.ID, "git:r", holderOf(e.join(b, m, fmt.Sprintf("m%d", i)), "m"), i*1000, 1000)
			}
			who := holderOf(e.join(b, m, "carol"), "carol")
			ctx := context.Background()
			var took []time.Duration
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				g, err := e.s.Reserve(ctx, m.ID, "", reserve("git:r", true, time.Minute, "src/a.py"), who)
				took = append(took, time.Since(start))
				if err != nil || !g.Granted {
					b.Fatal(g, err)
				}
				if _, err := e.s.ReleaseReservations(ctx, m.ID, "", "git:r", nil, who); err != nil {
					b.Fatal(err)
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
