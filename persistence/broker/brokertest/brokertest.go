// Package brokertest gives tests a real broker database on PostgreSQL (a
// schema of their own, dropped when the test ends) and a clock that moves
// only when told. It is imported by tests only.
package brokertest

import (
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers driver "pgx"
	"github.com/jmoiron/sqlx"
	"github.com/oklog/ulid/v2"
)

// PostgresURLEnv names the server tests use.
const PostgresURLEnv = "CLAUDEMESH_TEST_POSTGRES_URL"

// PostgresURL creates a schema for the test and returns a URL whose
// search_path points at it. Without CLAUDEMESH_TEST_POSTGRES_URL the test
// is skipped, except under CI=true, where that is a failure.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(PostgresURLEnv)
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set; CI must run the PostgreSQL variant", PostgresURLEnv)
		}
		t.Skipf("%s is not set", PostgresURLEnv)
	}
	admin, err := sqlx.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	schema := "cmtest_" + strings.ToLower(ulid.Make().String())
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		admin.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Clock is the clock of the broker's stores and rate limiters in tests:
// time moves only when told. It is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock that reads t until advanced.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d (backwards when d is negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
