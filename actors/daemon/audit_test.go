package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// TestAuditLogOfADaemon: a daemon's sends are in its audit log, which
// verifies; the log covers every sender, so an agent session is refused
// it and told how to read it.
func TestAuditLogOfADaemon(t *testing.T) {
	paths := tempPaths(t)
	d := startEmbedded(t, paths)
	defer d.Close()
	c := ipc.NewClient(paths.Socket())
	ctx := context.Background()
	tok, _ := register(t, c, "sess-a", "alpha", os.Getpid())
	if _, err := c.AsSession(tok).Send(ctx, &messages.SendRequest{To: "*", Message: ptr("audited"), ClientMessageID: "au-1"}, ""); err != nil {
		t.Fatal(err)
	}
	var e *messages.Error
	if _, err := c.AsSession(tok).Audit(ctx, 0, 10); !errors.As(err, &e) || e.Status != 403 || e.Code != "session_scope" {
		t.Fatalf("a session's GET /v1/audit: %v, want 403 session_scope", err)
	}
	page, err := c.Audit(ctx, 0, 0)
	if err != nil || len(page.Entries) == 0 || page.Entries[0].Kind != "outbox.accepted" || page.Entries[0].Subject != "au-1" {
		t.Fatalf("GET /v1/audit: %+v %v", page, err)
	}
	if _, err := messages.VerifyAudit(nil, page.Entries); err != nil {
		t.Fatal(err)
	}
}

// TestAuditOfReleases: every release is in the audit log with what it
// released and under which fence token — a member's reservations (which
// its connection does not renew) as well as a session's, part of a grant
// as well as all of it, and a lock released without naming its token.
func TestAuditOfReleases(t *testing.T) {
	paths := tempPaths(t)
	d := startEmbedded(t, paths)
	defer d.Close()
	c := ipc.NewClient(paths.Socket())
	ctx := context.Background()
	tok, _ := register(t, c, "sess-a", "alpha", os.Getpid())
	s := c.AsSession(tok)
	waitLinked(t, c, s)

	lock, err := c.AcquireLock(ctx, &messages.LockAcquireRequest{Key: "deploy", TTLMs: 60_000})
	if err != nil || !lock.Granted {
		t.Fatalf("acquire = %+v, %v", lock, err)
	}
	if rel, err := c.ReleaseLock(ctx, &messages.LockReleaseRequest{Key: "deploy"}); err != nil || !rel.Released {
		t.Fatalf("release = %+v, %v", rel, err)
	}
	var fences []int64
	for _, who := range []*ipc.Client{c, s} { // the member, then the session
		got, err := who.Reserve(ctx, &messages.ReserveRequest{Repo: "git:r", Patterns: []string{"docs/**", "src/**"}, TTLMs: 60_000})
		if err != nil || !got.Granted {
			t.Fatalf("reserve = %+v, %v", got, err)
		}
		fences = append(fences, got.FenceToken)
		if _, err := who.ReleaseReservations(ctx, &messages.ReleaseReservationsRequest{Repo: "git:r", Patterns: []string{"docs/**"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := who.ReleaseReservations(ctx, &messages.ReleaseReservationsRequest{Repo: "git:r"}); err != nil {
			t.Fatal(err)
		}
	}

	type detail struct {
		Fence    int64    `json:"fence_token"`
		Patterns []string `json:"patterns"`
	}
	var got []string
	if err := wait.Until(5*time.Second, "the releases' audit entries", func() bool {
		page, err := c.Audit(ctx, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, e := range page.Entries {
			if !strings.HasPrefix(e.Kind, "lock.") && !strings.HasPrefix(e.Kind, "reservation.") {
				continue
			}
			var d detail
			if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s %d %s", e.Kind, d.Fence, strings.Join(d.Patterns, ",")))
		}
		return len(got) == 8
	}); err != nil {
		t.Fatalf("%v; the log's lock and reservation entries:\n%s", err, strings.Join(got, "\n"))
	}
	want := []string{
		fmt.Sprintf("lock.acquired %d ", lock.Lock.FenceToken), fmt.Sprintf("lock.released %d ", lock.Lock.FenceToken),
		fmt.Sprintf("reservation.acquired %d docs/**,src/**", fences[0]), fmt.Sprintf("reservation.released %d docs/**", fences[0]),
		fmt.Sprintf("reservation.released %d src/**", fences[0]),
		fmt.Sprintf("reservation.acquired %d docs/**,src/**", fences[1]), fmt.Sprintf("reservation.released %d docs/**", fences[1]),
		fmt.Sprintf("reservation.released %d src/**", fences[1]),
	}
	if !slices.Equal(got, want) {
		t.Errorf("the audit log's lock and reservation entries:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
