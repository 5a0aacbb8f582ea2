package broker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// env is one backend under test.
type env struct {
	s     *Store
	clock *brokertest.Clock
	logs  *logRecorder
	opts  Options // to open the same database again
}

// logRecorder is a slog.Handler that keeps the messages logged.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}

// count returns how often msg was logged.
func (l *logRecorder) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

// retriedPerRequest is how often a batch fell back from the set-wise path.
func (e *env) retriedPerRequest() int { return e.logs.count("accept_batch_retry_per_request") }

// backends runs fn against SQLite and PostgreSQL. Without
// CLAUDEMESH_TEST_POSTGRES_URL the PostgreSQL variant is skipped, except
// under CI=true, where that is a failure.
func backends(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, openEnv(t, Options{Dir: t.TempDir()}))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, openEnv(t, Options{DatabaseURL: brokertest.PostgresURL(t)}))
	})
}

func openEnv(t testing.TB, opts Options) *env {
	t.Helper()
	clock, logs := brokertest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), &logRecorder{}
	opts.Now, opts.Log = clock.Now, slog.New(logs)
	s, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &env{s: s, clock: clock, logs: logs, opts: opts}
}

// replica opens a second store on e's database that keeps e's clock, as
// two replicas whose clocks agree: a store of its own clock would judge
// expiries (locks, reservations, leases) at another time.
func (e *env) replica(t testing.TB) *Store {
	t.Helper()
	opts := e.opts
	opts.Log = slog.New(slog.DiscardHandler)
	s, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newPubkey(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func (e *env) mesh(t testing.TB, m Mesh) *Mesh {
	t.Helper()
	if m.Slug == "" {
		m.Slug = "mesh-" + strings.ToLower(ulid.Make().String()[20:])
	}
	got, err := e.s.CreateMesh(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// join adds a member with a fresh pubkey through an invite.
func (e *env) join(t testing.TB, m *Mesh, name string) *Member {
	t.Helper()
	joined, err := e.s.RedeemInvite(context.Background(), e.invite(t, m.Slug, 1).Token, newPubkey(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return joined.Member
}

// count runs SELECT COUNT(*) FROM <from> with args.
func (e *env) count(t testing.TB, from string, args ...any) int {
	t.Helper()
	var n int
	if err := e.s.db.Get(&n, e.s.d.rewrite("SELECT COUNT(*) FROM "+from), args...); err != nil {
		t.Fatal(err)
	}
	return n
}

func fingerprint(body string) messages.Fingerprint { return sha256.Sum256([]byte(body)) }

// dm is a DM from sender to recipient whose fingerprint covers body.
func dm(mesh *Mesh, sender, recipient *Member, id, body string) *AcceptRequest {
	return &AcceptRequest{MeshID: mesh.ID, ClientMessageID: id, RequestFingerprint: fingerprint(body),
		DestinationKind: KindDM, DestinationRef: recipient.Pubkey, SenderPubkey: sender.Pubkey,
		TargetSpec: recipient.Pubkey, Priority: "next", Nonce: "bm9uY2U=", Ciphertext: body,
		Recipients: []string{recipient.Pubkey}}
}

func (e *env) accept(t testing.TB, reqs ...*AcceptRequest) []AcceptResult {
	t.Helper()
	res := e.s.AcceptBatch(context.Background(), reqs)
	if len(res) != len(reqs) {
		t.Fatalf("%d results for %d requests", len(res), len(reqs))
	}
	return res
}

func TestMigrationsIdempotent(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		want := e.s.SchemaVersion()
		if want < 1 {
			t.Fatalf("schema version %d after open", want)
		}
		m := e.mesh(t, Mesh{})
		again := openEnv(t, e.opts)
		if got := again.s.SchemaVersion(); got != want {
			t.Errorf("reopened at version %d, want %d", got, want)
		}
		if v, err := migrate(ctx, e.s.db, e.s.d); err != nil || v != want {
			t.Errorf("migrate again = %d, %v; want %d, nil", v, err, want)
		}
		all, err := persistence.LoadMigrations(e.s.d.migrations)
		if err != nil {
			t.Fatal(err)
		}
		if n := e.count(t, "schema_migrations"); n != len(all) { // the numbers may have gaps
			t.Errorf("%d migrations recorded, want %d", n, len(all))
		}
		if _, err := again.s.MeshByID(ctx, m.ID); err != nil {
			t.Errorf("data lost across reopen: %v", err)
		}
	})
}

// TestMigrationBelowRecorded: a database migrated past a migration it
// never got (0016, numbered beside 0017 by another line of work, which
// a binary without it applied) gets it at the next open, and keeps its
// version.
func TestMigrationBelowRecorded(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		want := e.s.SchemaVersion()
		for _, stmt := range []string{"DROP TABLE mesh_session", "DELETE FROM schema_migrations WHERE version = 16"} {
			if _, err := e.s.db.Exec(stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		again := openEnv(t, e.opts)
		if got := again.s.SchemaVersion(); got != want {
			t.Errorf("reopened at version %d, want %d", got, want)
		}
		if n := e.count(t, "schema_migrations WHERE version = 16"); n != 1 {
			t.Errorf("0016 recorded %d times, want once", n)
		}
		if n := e.count(t, "mesh_session"); n != 0 {
			t.Errorf("%d session rows in the table 0016 made again, want 0", n)
		}
	})
}

func TestSchemaTooNew(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		if _, err := e.s.db.Exec(e.s.d.rewrite("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'future', 0)"),
			e.s.SchemaVersion()+1); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(context.Background(), e.opts); !errors.Is(err, ErrSchemaTooNew) {
			t.Fatalf("Open = %v, want ErrSchemaTooNew", err)
		}
	})
}

// TestServedOnce: one broker serves a SQLite store at a time (a second
// would split the mesh between the two), while provisioning commands open
// it beside the one serving; the directory is free again once that broker
// closes it.
func TestServedOnce(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	first, err := Open(ctx, Options{Dir: dir, Serve: true})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := Open(ctx, Options{Dir: dir, Serve: true}); !errors.Is(err, ErrServed) || (err != nil && !strings.Contains(err.Error(), dir)) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("a second broker on the directory: %v, want ErrServed naming it", err)
	}
	provision, err := Open(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatalf("a provisioning command beside the broker: %v", err)
	}
	provision.Close()
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(ctx, Options{Dir: dir, Serve: true})
	if err != nil {
		t.Fatalf("a broker after the first closed: %v", err)
	}
	again.Close()

	// An open that fails after it took the lock lets it go.
	broken := t.TempDir()
	if err := os.Mkdir(filepath.Join(broken, FileName), 0o700); err != nil { // broker.db a directory: SQLite cannot open it
		t.Fatal(err)
	}
	if s, err := Open(ctx, Options{Dir: broken, Serve: true}); err == nil {
		s.Close()
		t.Fatal("opened a broker.db that is a directory")
	}
	if err := os.Remove(filepath.Join(broken, FileName)); err != nil {
		t.Fatal(err)
	}
	fixed, err := Open(ctx, Options{Dir: broken, Serve: true})
	if err != nil {
		t.Fatalf("a broker after a failed open: %v", err)
	}
	fixed.Close()
}
