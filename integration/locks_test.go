package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// lockMesh is a mesh on PostgreSQL served by two broker replicas: alice's
// daemon reaches the first through a proxy (a load balancer that can move
// to the second), bob's daemon reaches the second.
type lockMesh struct {
	*e2eMesh
	second *brokerProc
	proxy  *faultProxy
}

func newLockMesh(t *testing.T) *lockMesh {
	t.Helper()
	m := &lockMesh{e2eMesh: newE2EMeshOnPostgres(t)}
	m.second = startBrokerProc(t, m.brokerEnv, e2eBrokerArgs(m.store)...)
	m.proxy = startFaultProxy(t, m.broker.addr)
	m.proxy.pointAt(m.alice.env, m.broker.addr)
	repoint(t, m.bob.env, m.broker.addr, m.second.addr)
	m.alice.start(t)
	m.bob.start(t)
	return m
}

// sessions registers n agent sessions named prefix-i on p's daemon and
// waits until their broker connections are up; it returns their clients.
func (m *lockMesh) sessions(t *testing.T, p *e2ePeer, prefix string, n int) []*ipc.Client {
	t.Helper()
	out := make([]*ipc.Client, n)
	for i := range n {
		out[i] = registerSession(t, p.env.socket(), "demo", fmt.Sprint(prefix, i), fmt.Sprint(prefix, i)).c
	}
	for i, c := range out { // a session's lock list answers once its broker connection is up
		wait.For(t, 30*time.Second, fmt.Sprint(prefix, i, " connected"), func() bool {
			_, err := c.Locks(context.Background(), "", "")
			return err == nil
		})
	}
	return out
}

// TestLocksContended: 50 agent sessions, 25 on each of two daemons whose
// brokers are two replicas on one PostgreSQL database, each take one lock
// twice (waiting for it), hold it a moment and release it: at no time do
// two hold it, and every grant's fence token is greater than the one
// before. A holder that stops renewing (a lock taken outside a session)
// loses it after its TTL: a waiter on the other replica gets it, and the
// old holder's renewal is refused.
func TestLocksContended(t *testing.T) {
	m := newLockMesh(t)
	agents := append(m.sessions(t, m.alice, "a-", 25), m.sessions(t, m.bob, "b-", 25)...)
	ctx := context.Background()

	var holding atomic.Int32
	var mu sync.Mutex
	var fences []int64
	var wg sync.WaitGroup
	for i, c := range agents {
		wg.Go(func() {
			for round := range 2 {
				got, err := c.AcquireLock(ctx, &messages.LockAcquireRequest{Key: "file:src/lib.rs", TTLMs: 10000, WaitMs: 120000})
				if err != nil || !got.Granted {
					t.Errorf("agent %d round %d: %+v, %v", i, round, got, err)
					return
				}
				if n := holding.Add(1); n != 1 {
					t.Errorf("agent %d holds the lock with %d others", i, n-1)
				}
				mu.Lock()
				fences = append(fences, got.Lock.FenceToken)
				mu.Unlock()
				time.Sleep(2 * time.Millisecond) // the work the lock guards
				holding.Add(-1)
				if _, err := c.ReleaseLock(ctx, &messages.LockReleaseRequest{Key: "file:src/lib.rs", FenceToken: got.Lock.FenceToken}); err != nil {
					t.Errorf("agent %d release: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.Logf("alice's daemon:\n%s\nbob's daemon:\n%s", m.alice.d.stderr, m.bob.d.stderr)
	}
	if len(fences) != 100 {
		t.Fatalf("%d grants, want 100", len(fences))
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("grant %d has fence token %d after %d", i, fences[i], fences[i-1])
		}
	}

	member := ipc.NewClient(m.alice.env.socket()) // not a session: nobody renews its lock
	held, err := member.AcquireLock(ctx, &messages.LockAcquireRequest{Key: "deploy", TTLMs: 1000})
	if err != nil || !held.Granted {
		t.Fatalf("the member's acquire: %+v, %v", held, err)
	}
	start := time.Now()
	got, err := agents[30].AcquireLock(ctx, &messages.LockAcquireRequest{Key: "deploy", TTLMs: 10000, WaitMs: 10000})
	if err != nil || !got.Granted || got.Lock.FenceToken <= held.Lock.FenceToken {
		t.Fatalf("the waiter: %+v, %v", got, err)
	}
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Errorf("granted after %v, before the holder's TTL ran out", waited)
	}
	_, err = member.RenewLock(ctx, &messages.LockRenewRequest{Key: "deploy", FenceToken: held.Lock.FenceToken})
	var me *messages.Error
	if !errors.As(err, &me) || me.Code != messages.CodeLockNotHeld {
		t.Errorf("the old holder's renewal: %v, want lock_not_held", err)
	}
}

// TestLocksSurviveReplicaDeath: alice's session holds a lock through the
// first replica, which is killed; her daemon reconnects (the proxy now
// leads to the second) and renews the lock under the same token, while
// bob, on the second replica, waits for it through three of its TTLs and
// is never granted it; once alice releases it, bob gets it.
func TestLocksSurviveReplicaDeath(t *testing.T) {
	m := newLockMesh(t)
	a := m.sessions(t, m.alice, "a-", 1)[0]
	b := m.sessions(t, m.bob, "b-", 1)[0]
	ctx := context.Background()
	held, err := a.AcquireLock(ctx, &messages.LockAcquireRequest{Key: "release-branch", TTLMs: 3000})
	if err != nil || !held.Granted {
		t.Fatalf("alice's acquire: %+v, %v", held, err)
	}

	m.proxy.retarget(m.second.addr)
	stopBroker(t, m.broker, syscall.SIGKILL)
	m.proxy.cutAll()
	got, err := b.AcquireLock(ctx, &messages.LockAcquireRequest{Key: "release-branch", TTLMs: 3000, WaitMs: 9000})
	if err != nil || got.Granted || got.Lock.HolderName != "a-0" || got.Lock.FenceToken != held.Lock.FenceToken {
		t.Fatalf("bob after three TTLs: %+v, %v; want alice's lock, renewed", got, err)
	}
	renewed, err := a.RenewLock(ctx, &messages.LockRenewRequest{Key: "release-branch", FenceToken: held.Lock.FenceToken, TTLMs: 3000})
	if err != nil || renewed.Lock.FenceToken != held.Lock.FenceToken {
		t.Fatalf("alice's renewal through the second replica: %+v, %v", renewed, err)
	}
	if _, err := a.ReleaseLock(ctx, &messages.LockReleaseRequest{Key: "release-branch"}); err != nil {
		t.Fatal(err)
	}
	got, err = b.AcquireLock(ctx, &messages.LockAcquireRequest{Key: "release-branch", TTLMs: 3000, WaitMs: 5000})
	if err != nil || !got.Granted || got.Lock.FenceToken <= held.Lock.FenceToken {
		t.Fatalf("bob after the release: %+v, %v", got, err)
	}
}
