package join

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// lockedBuffer collects log output from the handler's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// env is a real store behind the join handler on an httptest server.
type env struct {
	store *broker.Store
	clock *brokertest.Clock
	logs  *lockedBuffer
	srv   *httptest.Server
	mesh  *broker.Mesh
}

// backends runs fn against SQLite and PostgreSQL. Without
// CLAUDEMESH_TEST_POSTGRES_URL the PostgreSQL variant is skipped, except
// under CI=true, where that is a failure.
func backends(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, newEnv(t, broker.Options{Dir: t.TempDir()}))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, newEnv(t, broker.Options{DatabaseURL: brokertest.PostgresURL(t)}))
	})
}

func newEnv(t *testing.T, opts broker.Options) *env {
	t.Helper()
	e := &env{clock: brokertest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), logs: &lockedBuffer{}}
	opts.Now = e.clock.Now
	s, err := broker.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e.store = s
	e.srv = httptest.NewServer(Handler(s, slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	t.Cleanup(e.srv.Close)
	if e.mesh, err = s.CreateMesh(context.Background(), broker.Mesh{Slug: "demo"}); err != nil {
		t.Fatal(err)
	}
	return e
}

// wsURL is the broker_url of the env's server.
func (e *env) wsURL() string { return "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/ws" }

// invite issues an invite to the env's mesh on its server and returns it.
func (e *env) invite(t *testing.T, uses int, ttl time.Duration) *broker.Invite {
	t.Helper()
	inv, err := e.store.CreateInvite(context.Background(), broker.InviteRequest{MeshSlug: e.mesh.Slug,
		BrokerURL: e.wsURL(), Uses: uses, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// members counts the mesh's active members.
func (e *env) members(t *testing.T) int {
	t.Helper()
	ms, err := e.store.Members(context.Background(), e.mesh.ID)
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}

// usesLeft is what the store lists for the invite.
func (e *env) usesLeft(t *testing.T, id string) int {
	t.Helper()
	list, err := e.store.Invites(context.Background(), e.mesh.Slug)
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range list {
		if inv.ID == id {
			return inv.UsesLeft
		}
	}
	t.Fatalf("invite %s not listed", id)
	return 0
}

func newIdentity(t *testing.T) *meshcrypto.Identity {
	t.Helper()
	id, err := meshcrypto.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}
