package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// TestLateGrantsGivenBack: a reserve and a lock acquire that the broker
// grants only after the daemon told its caller they timed out (504) are
// not left standing unknown to anyone: the daemon releases each as its
// grant arrives and records both transitions. The broker is held up for
// longer than the daemon waits by a transaction of the test's own on
// its PostgreSQL database, which holds the row the grant must lock.
func TestLateGrantsGivenBack(t *testing.T) {
	m := newE2EMeshOnPostgres(t)
	m.alice.start(t)
	c := ipc.NewClient(m.alice.env.socket())
	ctx := context.Background()
	got, err := c.Reserve(ctx, &messages.ReserveRequest{Repo: "git:r", Patterns: []string{"seed"}, TTLMs: 60_000})
	if err != nil || !got.Granted {
		t.Fatalf("seed reserve = %+v, %v", got, err)
	}
	if _, err := c.ReleaseReservations(ctx, &messages.ReleaseReservationsRequest{Repo: "git:r"}); err != nil {
		t.Fatal(err)
	}
	lock, err := c.AcquireLock(ctx, &messages.LockAcquireRequest{Key: "deploy", TTLMs: 60_000})
	if err != nil || !lock.Granted {
		t.Fatalf("seed lock = %+v, %v", lock, err)
	}
	if _, err := c.ReleaseLock(ctx, &messages.LockReleaseRequest{Key: "deploy"}); err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("pgx", m.brokerDB)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, held := range []struct {
		name, lockRow string
		ask           func() error
	}{
		{"reserve", `SELECT fence FROM reservation_scope WHERE repo = 'git:r' FOR UPDATE`, func() error {
			_, err := c.Reserve(ctx, &messages.ReserveRequest{Repo: "git:r", Patterns: []string{"src/**"}, TTLMs: 60_000})
			return err
		}},
		{"lock", `SELECT fence FROM mesh_lock WHERE key = 'deploy' FOR UPDATE`, func() error {
			_, err := c.AcquireLock(ctx, &messages.LockAcquireRequest{Key: "deploy", TTLMs: 60_000})
			return err
		}},
	} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var fence int64
		if err := tx.QueryRowContext(ctx, held.lockRow).Scan(&fence); err != nil {
			t.Fatal(held.name, err)
		}
		var me *messages.Error
		if err := held.ask(); !errors.As(err, &me) || me.Status != 504 {
			t.Fatalf("%s while the broker is held up: %v, want 504", held.name, err)
		}
		if err := tx.Rollback(); err != nil { // the broker grants now
			t.Fatal(err)
		}
	}
	var entries []string
	if err := wait.Until(20*time.Second, "both late grants released and recorded", func() bool {
		rs, err := c.Reservations(ctx, "", "git:r")
		if err != nil || len(rs.Reservations) != 0 {
			return false
		}
		ls, err := c.Locks(ctx, "", "")
		if err != nil || len(ls.Locks) != 0 && ls.Locks[0].Holder != "" {
			return false
		}
		page, err := c.Audit(ctx, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		entries = entries[:0]
		for _, e := range page.Entries {
			if strings.HasPrefix(e.Kind, "lock.") || strings.HasPrefix(e.Kind, "reservation.") {
				var d struct {
					Patterns []string `json:"patterns"`
				}
				json.Unmarshal([]byte(e.Detail), &d)
				entries = append(entries, e.Kind+" "+e.Subject+" "+strings.Join(d.Patterns, ","))
			}
		}
		return len(entries) == 8
	}); err != nil {
		t.Fatalf("%v; the log's entries:\n%s\ndaemon:\n%s", err, strings.Join(entries, "\n"), m.alice.d.stderr.String())
	}
	// The give-back of the grant may wait behind the held-up acquire on
	// the broker's connection: the entries, not their order.
	slices.Sort(entries)
	want := "lock.acquired deploy \nlock.acquired deploy \nlock.released deploy \nlock.released deploy \n" +
		"reservation.acquired git:r seed\nreservation.acquired git:r src/**\nreservation.released git:r seed\nreservation.released git:r src/**"
	if got := strings.Join(entries, "\n"); got != want {
		t.Errorf("the log's lock and reservation entries:\n%s\nwant\n%s", got, want)
	}
}

// TestWaitingReserveOfAGoneCaller, with two daemons on one broker: a
// reserve waiting for alice's reservation to end whose caller goes away
// (its HTTP request cancelled) is not tried again, so when alice releases
// nothing is granted to bob for no one.
func TestWaitingReserveOfAGoneCaller(t *testing.T) {
	m := newE2EMesh(t)
	m.alice.start(t)
	m.bob.start(t)
	ctx := context.Background()
	alice, bob := ipc.NewClient(m.alice.env.socket()), ipc.NewClient(m.bob.env.socket())
	if got, err := alice.Reserve(ctx, &messages.ReserveRequest{Repo: "git:r", Patterns: []string{"src/**"}, TTLMs: 60_000}); err != nil ||
		!got.Granted {
		t.Fatalf("alice's reserve = %+v, %v", got, err)
	}
	reqCtx, cancel := context.WithCancel(ctx)
	answered := make(chan error, 1)
	go func() {
		_, err := bob.Reserve(reqCtx, &messages.ReserveRequest{Repo: "git:r", Patterns: []string{"src/a.py"}, TTLMs: 60_000, WaitMs: 60_000})
		answered <- err
	}()
	waiting := func() string {
		resp, err := m.bob.c.Get("http://localhost/v1/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.HasPrefix(line, `cm_daemon_claims_waiting{kind="reservation",mesh="demo"}`) {
				return strings.Fields(line)[1]
			}
		}
		return ""
	}
	wait.For(t, 10*time.Second, "bob's reserve waiting", func() bool { return waiting() == "1" })
	cancel()
	<-answered
	if _, err := alice.ReleaseReservations(ctx, &messages.ReleaseReservationsRequest{Repo: "git:r"}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "bob's daemon to stop waiting", func() bool { return waiting() == "0" })
	list, err := alice.Reservations(ctx, "", "git:r")
	if err != nil || len(list.Reservations) != 0 {
		t.Errorf("reservations after the waiting caller went away and alice released: %+v, %v; want none", list, err)
	}
}
