package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
)

// TestE2ESendsByNameThroughBrokerKill: alice sends 2,000 messages, half to
// `#builds` and half to bob by his display name, while the broker is
// SIGKILLed and started again: every send is answered 202 — the names
// resolve from the last topic and peer lists alice's daemon had — and each
// reaches bob once. Then, with the broker killed again, alice's daemon
// restarts: the names it kept in outbox.db still resolve, while a name it
// never saw is refused (503 broker_unavailable) and stores nothing. On the
// broker's SQLite and PostgreSQL.
func TestE2ESendsByNameThroughBrokerKill(t *testing.T) {
	t.Parallel()
	for _, backend := range e2eBackends {
		t.Run(backend.name, func(t *testing.T) {
			t.Parallel()
			m := backend.mesh(t)
			alice, bob := m.alice, m.bob
			alice.start(t)
			bob.start(t)
			if r := runCLI(t, alice.env, "topic", "create", "builds"); r.code != 0 {
				t.Fatalf("topic create builds: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if r := runCLI(t, bob.env, "topic", "join", "builds"); r.code != 0 {
				t.Fatalf("bob: topic join builds: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			// alice's daemon sees both names once while the broker is up.
			mustSend(t, alice.c, "#builds", "the first build", "bn-first-topic")
			mustSend(t, alice.c, "bob", "the first DM", "bn-first-dm")

			accepted := namesStorm(t, m, 2000)
			accepted = append(accepted, "bn-first-topic", "bn-first-dm")
			accepted = append(accepted, namesAfterRestart(t, m)...)

			wait.For(t, e2eRecoveryDeadline, "alice's outbox to drain", func() bool {
				h := health(t, alice.c)
				if h.Dead > 0 {
					t.Fatalf("alice's outbox has %d dead rows: %+v", h.Dead, listAll(t, alice.c, messages.StatusDead))
				}
				return h.QueueDepth == 0 && h.Inflight == 0
			})
			want := make(map[string]bool, len(accepted))
			for _, id := range accepted {
				want[id] = true
			}
			reachedOnce(t, m, bob, want)
		})
	}
}

// namesStorm sends total messages from alice, alternately to #builds and
// to "bob", from 8 goroutines; the broker is SIGKILLed once a fifth are
// accepted with both daemons connected, and started again once alice's
// daemon has seen it gone and answered three fifths. Every send must be
// answered 202; it returns their ids.
func namesStorm(t *testing.T, m *e2eMesh, total int64) []string {
	t.Helper()
	var next, accepted, answered atomic.Int64
	var mu sync.Mutex
	var refused []string
	var wg sync.WaitGroup
	// Pacing (not synchronization): about 330 sends a second, so that the
	// outage falls in the middle of the storm.
	pace := time.NewTicker(3 * time.Millisecond)
	defer pace.Stop()
	for range 8 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= total {
					return
				}
				<-pace.C
				id, to := fmt.Sprintf("bn-dm-%04d", i), "bob"
				if i%2 == 0 {
					id, to = fmt.Sprintf("bn-topic-%04d", i), "#builds"
				}
				st, body, err := trySend(m.alice.c, to, "sent by name: "+id, id)
				if err != nil || st != http.StatusAccepted {
					mu.Lock()
					refused = append(refused, fmt.Sprintf("%s to %s: status %d, %v: %s", id, to, st, err, body))
					mu.Unlock()
				} else {
					accepted.Add(1)
				}
				answered.Add(1)
			}
		})
	}
	wait.For(t, e2eRecoveryDeadline, "a fifth accepted with both daemons connected", func() bool {
		return accepted.Load() >= total/5 && m.alice.connected() && m.bob.connected()
	})
	m.killBroker()
	wait.For(t, e2eRecoveryDeadline, "alice's daemon to see the broker gone", func() bool { return !m.alice.connected() })
	down := answered.Load()
	wait.For(t, e2eRecoveryDeadline, "three fifths answered", func() bool { return answered.Load() >= total*3/5 })
	t.Logf("broker SIGKILLed: %d sends answered while alice's daemon was disconnected", answered.Load()-down)
	m.restartBroker()
	wg.Wait()
	if len(refused) > 0 {
		t.Fatalf("%d of %d sends were not answered 202, first: %s", len(refused), total, refused[0])
	}
	ids := make([]string, 0, total)
	for i := range total {
		if i%2 == 0 {
			ids = append(ids, fmt.Sprintf("bn-topic-%04d", i))
		} else {
			ids = append(ids, fmt.Sprintf("bn-dm-%04d", i))
		}
	}
	return ids
}

// namesAfterRestart kills the broker, restarts alice's daemon while it is
// down, and sends by name, over the API and with `claudemesh send`: the
// kept names are answered 202, names never seen 503 broker_unavailable
// with nothing stored. The broker then comes back. It returns the ids
// accepted.
func namesAfterRestart(t *testing.T, m *e2eMesh) []string {
	t.Helper()
	alice := m.alice
	m.killBroker()
	alice.d.stop()
	alice.d = startDaemon(t, alice.env, "--no-tcp")
	alice.c.CloseIdleConnections()
	var ids []string
	for i := range 10 {
		for _, to := range []string{"#builds", "BOB"} {
			id := fmt.Sprintf("bn-restart-%s-%d", strings.Trim(strings.ToLower(to), "#"), i)
			mustSend(t, alice.c, to, "sent by name after a restart: "+id, id)
			ids = append(ids, id)
		}
	}
	// The command line too: `send` cannot list the peers, and gives the
	// daemon the name.
	for _, to := range []string{"#builds", "bob"} {
		id := "bn-restart-cli-" + strings.Trim(to, "#")
		if r := runCLI(t, alice.env, "send", to, "sent by name from the command line", "--client-message-id", id); r.code != 0 ||
			r.stdout != "queued "+id+" to "+to+"\n" {
			t.Fatalf("claudemesh send %s with the broker away: exit %d\n%s%s", to, r.code, r.stdout, r.stderr)
		}
		ids = append(ids, id)
	}
	for _, to := range []string{"#never-seen", "carol"} {
		st, body, err := trySend(alice.c, to, "to a name never seen", "bn-unseen")
		var refusal messages.ErrorBody
		if err != nil || st != http.StatusServiceUnavailable || json.Unmarshal(body, &refusal) != nil ||
			refusal.Error != messages.CodeBrokerUnavailable || !strings.Contains(refusal.Detail, "never seen") {
			t.Fatalf("send to %s with the broker away: %d %v %s; want 503 broker_unavailable saying the name was never seen", to, st, err, body)
		}
	}
	if row, ok := byClientID(listAll(t, alice.c, ""))["bn-unseen"]; ok {
		t.Fatalf("a refused send stored a row: %+v", row)
	}
	m.restartBroker()
	alice.waitConnected(t)
	return ids
}
