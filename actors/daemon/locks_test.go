package daemon_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// TestSessionLocks, on a daemon with its embedded broker: a session's lock
// is granted with a fence token and refused to another session with the
// holder's name; it outlives its TTL while the session lives (the daemon
// renews it); a waiting acquire gets it, under a greater token, as soon as
// the holder's session ends; bad input is refused with its code.
func TestSessionLocks(t *testing.T) {
	paths := tempPaths(t)
	d := startEmbedded(t, paths)
	defer d.Close()
	ctx := context.Background()
	c := ipc.NewClient(paths.Socket())
	tokA, _ := register(t, c, "sess-a", "alpha", os.Getpid())
	tokB, _ := register(t, c, "sess-b", "beta", os.Getpid())
	a, b := c.AsSession(tokA), c.AsSession(tokB)
	waitLinked(t, a, b)

	got, err := a.AcquireLock(ctx, &messages.LockAcquireRequest{Key: "file:src/lib.rs", Repo: "repo-1", TTLMs: 1000})
	if err != nil || !got.Granted || got.Lock.FenceToken < 1 || got.Lock.HolderName != "alpha" || got.Lock.Mesh != "local" {
		t.Fatalf("acquire = %+v, %v", got, err)
	}
	fence := got.Lock.FenceToken
	if other, err := b.AcquireLock(ctx, &messages.LockAcquireRequest{Key: "file:src/lib.rs", Repo: "repo-1", TTLMs: 1000}); err != nil ||
		other.Granted || other.Lock.HolderName != "alpha" {
		t.Fatalf("another session's acquire = %+v, %v", other, err)
	}
	if other, err := b.AcquireLock(ctx, &messages.LockAcquireRequest{Key: "file:src/lib.rs", Repo: "repo-2", TTLMs: 1000}); err != nil ||
		!other.Granted {
		t.Fatalf("the same key in another repository = %+v, %v", other, err)
	}
	// Waiting three TTLs for a lock the daemon keeps renewing: not granted.
	if other, err := b.AcquireLock(ctx, &messages.LockAcquireRequest{Key: "file:src/lib.rs", Repo: "repo-1", TTLMs: 1000,
		WaitMs: 3000}); err != nil || other.Granted || other.Lock.FenceToken != fence {
		t.Fatalf("after three TTLs = %+v, %v; want still alpha's (renewed)", other, err)
	}
	list, err := c.Locks(ctx, "", "repo-1")
	if err != nil || len(list.Locks) != 1 || list.Locks[0].HolderName != "alpha" {
		t.Fatalf("Locks = %+v, %v", list, err)
	}

	waited := make(chan *messages.LockAcquired, 1)
	go func() {
		got, err := b.AcquireLock(ctx, &messages.LockAcquireRequest{Key: "file:src/lib.rs", Repo: "repo-1", TTLMs: 1000, WaitMs: 20000})
		if err != nil {
			t.Error(err)
		}
		waited <- got
	}()
	if _, err := c.DeregisterSession(ctx, tokA); err != nil {
		t.Fatal(err)
	}
	got = <-waited
	if got == nil || !got.Granted || got.Lock.FenceToken <= fence || got.Lock.HolderName != "beta" {
		t.Fatalf("the waiter after alpha ended = %+v", got)
	}
	if rel, err := b.ReleaseLock(ctx, &messages.LockReleaseRequest{Key: "file:src/lib.rs", Repo: "repo-1"}); err != nil || !rel.Released {
		t.Errorf("release = %+v, %v", rel, err)
	}
	if rel, err := b.ReleaseLock(ctx, &messages.LockReleaseRequest{Key: "file:src/lib.rs", Repo: "repo-1"}); err != nil || rel.Released {
		t.Errorf("release again = %+v, %v; want released false", rel, err)
	}
	if _, err := b.RenewLock(ctx, &messages.LockRenewRequest{Key: "file:src/lib.rs", Repo: "repo-1", FenceToken: got.Lock.FenceToken}); !isCode(err, messages.CodeLockNotHeld) {
		t.Errorf("renew after the release: %v, want lock_not_held", err)
	}

	for _, bad := range []struct {
		req  *messages.LockAcquireRequest
		code string
	}{
		{&messages.LockAcquireRequest{Key: ""}, messages.CodeInvalidLockKey},
		{&messages.LockAcquireRequest{Key: "k", Repo: "a\tb"}, messages.CodeInvalidLockRepo},
		{&messages.LockAcquireRequest{Key: "k", TTLMs: 10}, messages.CodeInvalidLockTTL},
		{&messages.LockAcquireRequest{Key: "k", WaitMs: -1}, messages.CodeInvalidLockWait},
	} {
		if _, err := b.AcquireLock(ctx, bad.req); !isCode(err, bad.code) {
			t.Errorf("%+v: %v, want %s", bad.req, err, bad.code)
		}
	}
	if _, err := b.RenewLock(ctx, &messages.LockRenewRequest{Key: "k"}); !isCode(err, messages.CodeInvalidFence) {
		t.Errorf("renew without a token: %v", err)
	}
	if list, err := c.Locks(ctx, "", ""); err != nil || len(list.Locks) != 1 || list.Locks[0].Repo != "repo-2" {
		t.Errorf("Locks after the bad input = %+v, %v", list, err)
	}
}

// TestSessionLockSurvivesRestart: a session's lock outlives a restart of
// the daemon (the session comes back, the lock is read back and renewed):
// another session waiting two of its TTLs after the restart is not granted
// it; the session's end releases it; each transition is in the audit log,
// and a session that does not come back abandons its locks.
func TestSessionLockSurvivesRestart(t *testing.T) {
	paths := tempPaths(t)
	d := startEmbedded(t, paths)
	ctx := context.Background()
	c := ipc.NewClient(paths.Socket())
	tokA, _ := register(t, c, "sess-a", "alpha", os.Getpid())
	_, _ = register(t, c, "sess-gone", "gamma", os.Getpid())
	waitLinked(t, c.AsSession(tokA))
	got, err := c.AsSession(tokA).AcquireLock(ctx, &messages.LockAcquireRequest{Key: "deploy", TTLMs: 2000})
	if err != nil || !got.Granted {
		t.Fatalf("acquire = %+v, %v", got, err)
	}
	if got, err := c.Sessions(ctx); err != nil || len(got) != 2 {
		t.Fatalf("sessions = %+v, %v", got, err)
	}
	// gamma's lock is kept too; gamma will not come back.
	tokens, _ := paths.LoadSessions()
	var tokG string
	for _, r := range tokens {
		if r.SessionID == "sess-gone" {
			tokG = r.Token
		}
	}
	waitLinked(t, c.AsSession(tokG))
	if g, err := c.AsSession(tokG).AcquireLock(ctx, &messages.LockAcquireRequest{Key: "gamma-lock", TTLMs: 2000}); err != nil || !g.Granted {
		t.Fatalf("gamma's acquire = %+v, %v", g, err)
	}
	d.Close()
	recs, err := paths.LoadSessions()
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if recs[i].SessionID == "sess-gone" {
			recs[i].StartTime++ // its process is gone: not restored
		}
	}
	if err := paths.SaveSessions(recs); err != nil {
		t.Fatal(err)
	}

	d = startEmbedded(t, paths)
	defer d.Close()
	tokB, _ := register(t, c, "sess-b", "beta", os.Getpid())
	waitLinked(t, c.AsSession(tokA), c.AsSession(tokB))
	other, err := c.AsSession(tokB).AcquireLock(ctx, &messages.LockAcquireRequest{Key: "deploy", TTLMs: 2000, WaitMs: 4000})
	if err != nil || other.Granted || other.Lock.HolderName != "alpha" || other.Lock.FenceToken != got.Lock.FenceToken {
		t.Fatalf("two TTLs after the restart = %+v, %v; want alpha's lock, renewed", other, err)
	}
	if _, err := c.DeregisterSession(ctx, tokA); err != nil {
		t.Fatal(err)
	}
	if other, err = c.AsSession(tokB).AcquireLock(ctx, &messages.LockAcquireRequest{Key: "deploy", WaitMs: 5000}); err != nil || !other.Granted {
		t.Fatalf("after alpha ended = %+v, %v", other, err)
	}
	var kinds []string
	page, err := c.Audit(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Entries {
		if strings.HasPrefix(e.Kind, "lock.") {
			kinds = append(kinds, e.Kind+" "+e.Subject)
		}
	}
	want := []string{"lock.acquired deploy", "lock.acquired gamma-lock", "lock.abandoned gamma-lock", "lock.released deploy",
		"lock.acquired deploy"}
	if !slices.Equal(kinds, want) {
		t.Errorf("lock entries of the audit log = %q, want %q", kinds, want)
	}
}

// waitLinked waits until each session's broker connection is up: its lock
// list answers (a peer list may name a session before its link is).
func waitLinked(t *testing.T, sessions ...*ipc.Client) {
	t.Helper()
	for _, s := range sessions {
		wait.For(t, settleWithin, "a session's broker connection", func() bool {
			_, err := s.Locks(context.Background(), "", "")
			return err == nil
		})
	}
}

func isCode(err error, code string) bool {
	var me *messages.Error
	return errors.As(err, &me) && me.Code == code && me.Status >= 400 && me.Status < 500
}
