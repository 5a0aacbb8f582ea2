// Package brokertest gives tests a real broker database on PostgreSQL: a
// schema of their own, dropped when the test ends. It is imported by tests
// only.
package brokertest

import (
	"net/url"
	"os"
	"strings"
	"testing"

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
