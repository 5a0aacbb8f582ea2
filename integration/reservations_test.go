package integration

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// reserveAs asks c for patterns in the test repository.
func reserveAs(t *testing.T, c *ipc.Client, req messages.ReserveRequest) *messages.Reserved {
	t.Helper()
	if req.Repo == "" {
		req.Repo = "git:reservations-test"
	}
	got, err := c.Reserve(context.Background(), &req)
	if err != nil {
		t.Fatalf("reserve %v: %v", req.Patterns, err)
	}
	return got
}

// TestReservationsTwoDaemons: two daemons on two broker replicas of one
// PostgreSQL database, two agent sessions on each. A's exclusive src/**
// refuses B's src/app.py, exclusive and shared, naming the holder, the
// pattern, exclusivity and expiry, and the other session of A's own daemon
// too; B's docs/*.md is granted; A's daemon renews the reservation past
// its TTL; the guard's check names A; a session that ends releases its
// reservations at once; once A's daemon is killed (its session gone, no
// release) and the TTL passes, B's waiting request is granted with a
// higher fence token.
func TestReservationsTwoDaemons(t *testing.T) {
	m := newLockMesh(t)
	as, bs := m.sessions(t, m.alice, "a-", 2), m.sessions(t, m.bob, "b-", 2)
	held := reserveAs(t, as[0], messages.ReserveRequest{Patterns: []string{"src/**"}, TTLMs: 2000})
	if !held.Granted || held.FenceToken < 1 {
		t.Fatalf("a-0's src/** = %+v", held)
	}
	for _, shared := range []bool{false, true} {
		got := reserveAs(t, bs[0], messages.ReserveRequest{Patterns: []string{"src/app.py"}, Shared: shared})
		if got.Granted || len(got.Conflicts) != 1 {
			t.Fatalf("b-0's src/app.py (shared %v) = %+v; want refused", shared, got)
		}
		c := got.Conflicts[0]
		if c.HolderName != "a-0" || c.Pattern != "src/**" || !c.Exclusive || c.ExpiresAt == "" || c.Path != "src/app.py" {
			t.Errorf("conflict = %+v", c)
		}
	}
	if got := reserveAs(t, as[1], messages.ReserveRequest{Patterns: []string{"src/lib/x.go"}}); got.Granted {
		t.Errorf("a-1 (a-0's daemon, another session) = %+v; want refused", got)
	}
	docs := reserveAs(t, bs[0], messages.ReserveRequest{Patterns: []string{"docs/*.md"}})
	if !docs.Granted || docs.FenceToken <= held.FenceToken {
		t.Fatalf("b-0's docs/*.md = %+v", docs)
	}

	time.Sleep(3 * time.Second) // past the TTL: only a-0's daemon's renewals keep it
	if got := reserveAs(t, bs[1], messages.ReserveRequest{Patterns: []string{"src/main.go"}}); got.Granted {
		t.Fatalf("b-1 after a-0's first TTL = %+v; want refused (renewed)", got)
	}
	check, err := bs[0].CheckPaths(context.Background(), &messages.CheckPathsRequest{Repo: "git:reservations-test",
		Paths: []string{"README.md", "src/app.py", "docs/a.md"}})
	if err != nil || len(check.Conflicts) != 1 || check.Conflicts[0].Path != "src/app.py" || check.Conflicts[0].HolderName != "a-0" {
		t.Errorf("b-0's check (its own docs/*.md not in its way) = %+v, %v", check, err)
	}

	lib := registerSession(t, m.alice.env.socket(), "demo", "a-lib", "a-lib")
	wait.For(t, 30*time.Second, "a-lib connected", func() bool {
		_, err := lib.c.Reservations(context.Background(), "", "")
		return err == nil
	})
	if got := reserveAs(t, lib.c, messages.ReserveRequest{Patterns: []string{"lib/**"}, TTLMs: 60000}); !got.Granted {
		t.Fatalf("a-lib's lib/** = %+v", got)
	}
	if _, err := ipc.NewClient(m.alice.env.socket()).DeregisterSession(context.Background(), lib.token); err != nil {
		t.Fatal(err)
	}
	if got := reserveAs(t, bs[1], messages.ReserveRequest{Patterns: []string{"lib/x.go"}, WaitMs: 5000}); !got.Granted {
		t.Errorf("b-1's lib/x.go after a-lib ended = %+v; want granted (released, not run out)", got)
	}

	m.alice.d.kill9()
	start := time.Now()
	got := reserveAs(t, bs[0], messages.ReserveRequest{Patterns: []string{"src/app.py"}, WaitMs: 15000})
	if !got.Granted || got.FenceToken <= docs.FenceToken {
		t.Fatalf("b-0's src/app.py after a-0's daemon died = %+v; want granted with a higher fence token", got)
	}
	t.Logf("granted %v after the kill, fence token %d (a-0's was %d)", time.Since(start).Round(time.Millisecond), got.FenceToken, held.FenceToken)
}

// TestReservationsLegacyBroker: against a broker that does not advertise
// reservations (one speaking upstream's protocol), every reservation route
// is 501 reservations_unsupported, and claudemesh reserve says so.
func TestReservationsLegacyBroker(t *testing.T) {
	m := newE2EMesh(t)
	m.restartBrokerWith("--legacy-protocol")
	m.alice.startLegacy(t)
	var body messages.ErrorBody
	if st, _, err := getJSON(m.alice.c, "http://localhost/v1/reservations", &body); err != nil || st != http.StatusNotImplemented ||
		body.Error != messages.CodeReservationsUnsupported {
		t.Errorf("GET /v1/reservations: %d %+v %v; want 501 reservations_unsupported", st, body, err)
	}
	res := do(t, m.alice.c, newRequest(t, http.MethodPost, "http://localhost/v1/reservations", []byte(`{"repo":"git:r","patterns":["src/**"]}`)))
	if res.status != http.StatusNotImplemented || res.json(t)["error"] != messages.CodeReservationsUnsupported {
		t.Errorf("POST /v1/reservations: %d %s", res.status, res.body)
	}
	dir := t.TempDir()
	gitRun(t, dir, os.Environ(), "init", "-q")
	gitRun(t, dir, os.Environ(), "commit", "-q", "--allow-empty", "-m", "root")
	if r := cliIn(t, dir, m.alice.env.environ(), "reserve", "src/**"); r.code == 0 || !strings.Contains(r.stderr, "has no file reservations") {
		t.Errorf("claudemesh reserve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestReservationsContended: 20 agent sessions, 10 on each of two daemons
// whose brokers are two replicas on one PostgreSQL database, each reserve
// twice (waiting) one of four exclusive patterns that all cover
// src/app.py, hold it a moment and release it: at no time do two hold
// overlapping reservations, and the fence tokens of the grants, in the
// order they were held, only grow.
func TestReservationsContended(t *testing.T) {
	m := newLockMesh(t)
	agents := append(m.sessions(t, m.alice, "a-", 10), m.sessions(t, m.bob, "b-", 10)...)
	patterns := []string{"src/**", "src/app.py", "**/*.py", "src/*.py"}
	ctx := context.Background()
	var holding atomic.Int32
	var mu sync.Mutex
	var fences []int64
	var wg sync.WaitGroup
	for i, c := range agents {
		wg.Go(func() {
			for round := range 2 {
				got, err := c.Reserve(ctx, &messages.ReserveRequest{Repo: "git:contended", Patterns: []string{patterns[(i+round)%len(patterns)]},
					TTLMs: 10000, WaitMs: 120000})
				if err != nil || !got.Granted {
					t.Errorf("agent %d round %d: %+v, %v", i, round, got, err)
					return
				}
				if n := holding.Add(1); n != 1 {
					t.Errorf("agent %d holds %s with %d others", i, got.Reservations[0].Pattern, n-1)
				}
				mu.Lock()
				fences = append(fences, got.FenceToken)
				mu.Unlock()
				time.Sleep(2 * time.Millisecond) // the work the reservation guards
				holding.Add(-1)
				if _, err := c.ReleaseReservations(ctx, &messages.ReleaseReservationsRequest{Repo: "git:contended"}); err != nil {
					t.Errorf("agent %d release: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	if len(fences) != 40 {
		t.Fatalf("%d grants, want 40", len(fences))
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("grant %d has fence token %d after %d", i, fences[i], fences[i-1])
		}
	}
}
