package broker

import (
	"embed"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
)

const (
	sqliteName   = "sqlite"
	postgresName = "postgres"
)

//go:embed migrations
var migrationFiles embed.FS

// dialect is everything that differs between the backends. Queries are
// written once with `?` placeholders and the markers below; rewrite turns
// them into the backend's SQL.
//
//	EACH(?)          a JSON array of strings as a one-column table `value`
//	/*FOR SHARE*/    row lock on the dedupe row `d` (PostgreSQL)
//	/*SKIP LOCKED*/  claim lock on the delivery row `d` (PostgreSQL)
//	/*FOR UPDATE*/   row lock on the selected row (PostgreSQL)
type dialect struct {
	name       string
	bind       int // sqlx bind type
	replacer   *strings.Replacer
	migrations fs.FS
	// lockMigrations serializes replicas migrating the same schema; it
	// runs first in every migration transaction. SQLite's BEGIN IMMEDIATE
	// already holds the write lock.
	lockMigrations string
	// rewritten keeps what rewrite made of each query, at most
	// maxRewritten of them: the queries are constants and the VALUES lists
	// of a few batch sizes, rewritten on every statement of the hot path.
	rewritten  sync.Map // query → backend SQL
	nRewritten atomic.Int64
}

// maxRewritten bounds the queries rewrite keeps (a few hundred in use).
const maxRewritten = 4096

var sqliteDialect = &dialect{
	name: sqliteName,
	bind: sqlx.QUESTION,
	replacer: strings.NewReplacer(
		"EACH(?)", "json_each(?)",
		// SQLite's planner, with no statistics, scans a repository's
		// reservations by the primary key rather than narrow them by
		// these indexes; PostgreSQL's statistics choose well.
		"/*INDEXED BY reservation_prefix*/", "INDEXED BY reservation_prefix",
		"/*INDEXED BY reservation_member*/", "INDEXED BY reservation_member",
		"/*INDEXED BY delivery_queue_message*/", "INDEXED BY sqlite_autoindex_delivery_queue_1", // UNIQUE (message_id, recipient_pubkey)
		"/*FOR SHARE*/", "",
		"/*SKIP LOCKED*/", "",
		"/*FOR UPDATE*/", "",
	),
	migrations: mustSub("migrations/sqlite"),
}

var postgresDialect = &dialect{
	name: postgresName,
	bind: sqlx.DOLLAR,
	replacer: strings.NewReplacer(
		"EACH(?)", "jsonb_array_elements_text(CAST(? AS jsonb))",
		"/*INDEXED BY reservation_prefix*/", "",
		"/*INDEXED BY reservation_member*/", "",
		"/*INDEXED BY delivery_queue_message*/", "",
		"/*FOR SHARE*/", "FOR SHARE OF d",
		"/*SKIP LOCKED*/", "FOR UPDATE OF d SKIP LOCKED",
		"/*FOR UPDATE*/", "FOR UPDATE",
	),
	migrations:     mustSub("migrations/postgres"),
	lockMigrations: "SELECT pg_advisory_xact_lock(hashtext('claudemesh-broker-migrate:' || current_schema()))",
}

func mustSub(dir string) fs.FS {
	sub, err := fs.Sub(migrationFiles, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

// rewrite turns a query written with `?` and the markers into this
// backend's SQL.
func (d *dialect) rewrite(query string) string {
	if q, ok := d.rewritten.Load(query); ok {
		return q.(string)
	}
	q := sqlx.Rebind(d.bind, d.replacer.Replace(query))
	if d.nRewritten.Add(1) <= maxRewritten {
		d.rewritten.Store(query, q)
	}
	return q
}

// time is t as a parameter: Unix ms on SQLite, a UTC time on PostgreSQL.
func (d *dialect) time(t time.Time) any {
	if d.name == sqliteName {
		return t.UnixMilli()
	}
	return t.UTC()
}

// timeOrNull is time for a nullable column.
func (d *dialect) timeOrNull(t *time.Time) any {
	if t == nil {
		return nil
	}
	return d.time(*t)
}
