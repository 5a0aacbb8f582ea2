package join

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
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

// invite mints an invite to the env's mesh and returns its token.
func (e *env) invite(t *testing.T, uses int, ttl time.Duration) string {
	t.Helper()
	inv, err := e.store.CreateInvite(context.Background(), e.mesh.Slug, uses, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return inv.Token
}

// inviteURL is the invite URL of token on the env's server.
func (e *env) inviteURL(t *testing.T, token string) string {
	t.Helper()
	u, err := InviteURL(e.srv.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func newIdentity(t *testing.T) *meshcrypto.Identity {
	t.Helper()
	id, err := meshcrypto.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func brokerOptionsSQLite(t *testing.T) broker.Options {
	return broker.Options{Dir: t.TempDir()}
}
