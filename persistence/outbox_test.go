package persistence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

func openTestOutbox(t *testing.T) *Outbox {
	t.Helper()
	o, err := OpenOutbox(context.Background(), filepath.Join(t.TempDir(), "outbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

func accept(t *testing.T, o *Outbox, b *Batch, id string, fpByte byte) (*messages.AcceptResult, error) {
	t.Helper()
	var res *messages.AcceptResult
	err := b.Do(func(tx *Tx) (err error) {
		res, err = o.Accept(tx, &messages.AcceptSend{Mesh: "m", ClientMessageID: id, RowID: "row-" + id,
			Fingerprint: messages.Fingerprint{fpByte}, Payload: []byte(`{"type":"send","id":"` + id + `"}`), Now: 1}, false)
		return err
	})
	return res, err
}

func inBatch(t *testing.T, o *Outbox, fn func(b *Batch)) {
	t.Helper()
	b, err := o.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fn(b)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, o *Outbox, where string) int {
	t.Helper()
	var n int
	if err := o.db.Get(&n, "SELECT COUNT(*) FROM outbox WHERE "+where); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBatchSavepoints: a command that fails inside a batch loses only its
// own writes; its neighbours commit.
func TestBatchSavepoints(t *testing.T) {
	o := openTestOutbox(t)
	inBatch(t, o, func(b *Batch) {
		if _, err := accept(t, o, b, "a", 1); err != nil {
			t.Fatal(err)
		}
		err := b.Do(func(tx *Tx) error {
			if _, err := tx.Exec(`UPDATE outbox SET status = 'done' WHERE client_message_id = 'a'`); err != nil {
				return err
			}
			return errors.New("command failed after writing")
		})
		if err == nil {
			t.Fatal("want the command's error")
		}
		if _, err := accept(t, o, b, "b", 2); err != nil {
			t.Fatal(err)
		}
	})
	if got := count(t, o, "status = 'pending'"); got != 2 {
		t.Fatalf("pending rows = %d, want 2 (the failed command's update must be rolled back)", got)
	}
}

// TestAcceptSameIDInOneBatch: two accepts of one id in one transaction see
// each other: one row, the second answer decided from it.
func TestAcceptSameIDInOneBatch(t *testing.T) {
	o := openTestOutbox(t)
	inBatch(t, o, func(b *Batch) {
		first, _ := accept(t, o, b, "x", 1)
		again, _ := accept(t, o, b, "x", 1)
		other, _ := accept(t, o, b, "x", 9)
		if !first.Inserted || again.Inserted || again.Outcome != messages.AcceptQueued {
			t.Fatalf("first %+v, again %+v", first, again)
		}
		if other.Outcome != messages.AcceptConflict || other.Conflict != "outbox_pending_fingerprint_mismatch" {
			t.Fatalf("different fingerprint: %+v", other)
		}
	})
	if got := count(t, o, "client_message_id = 'x'"); got != 1 {
		t.Fatalf("rows = %d, want 1", got)
	}
}

func TestRecoverInflight(t *testing.T) {
	o := openTestOutbox(t)
	inBatch(t, o, func(b *Batch) {
		accept(t, o, b, "a", 1)
		accept(t, o, b, "b", 2)
	})
	if _, err := o.db.Exec(`UPDATE outbox SET status = 'inflight', attempts = 3 WHERE client_message_id = 'a'`); err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_000_000)
	n, err := o.RecoverInflight(context.Background(), now, 500*time.Millisecond)
	if err != nil || n != 1 {
		t.Fatalf("recovered %d rows (%v), want 1", n, err)
	}
	if got := count(t, o, "client_message_id = 'a' AND status = 'pending' AND attempts = 4 AND next_attempt_at = 1000500"); got != 1 {
		t.Fatal("recovered row has the wrong state")
	}
	if got := count(t, o, "client_message_id = 'b' AND attempts = 0"); got != 1 {
		t.Fatal("a pending row was touched")
	}
}

// TestRequeueClashChangesNothing: a requeue whose new id is taken fails as
// a whole; the old row stays as it was.
func TestRequeueClashChangesNothing(t *testing.T) {
	o := openTestOutbox(t)
	inBatch(t, o, func(b *Batch) {
		accept(t, o, b, "old", 1)
		accept(t, o, b, "taken", 2)
	})
	o.db.MustExec(`UPDATE outbox SET status = 'dead', last_error = 'rejected' WHERE client_message_id = 'old'`)
	inBatch(t, o, func(b *Batch) {
		err := b.Do(func(tx *Tx) error {
			_, err := o.Requeue(tx, &messages.RequeueOutbox{ID: "row-old", NewRowID: "row-new", NewClientMessageID: "taken", Now: 5})
			return err
		})
		var me *messages.Error
		if !errors.As(err, &me) || me.Code != messages.CodeClientIDInUse {
			t.Fatalf("got %v, want %s", err, messages.CodeClientIDInUse)
		}
	})
	if got := count(t, o, "client_message_id = 'old' AND status = 'dead' AND superseded_by IS NULL"); got != 1 {
		t.Fatal("the old row changed")
	}
	if got := count(t, o, "1=1"); got != 2 {
		t.Fatalf("rows = %d, want 2", got)
	}
}

func TestMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	v1 := fstest.MapFS{"0001_init.sql": {Data: []byte("CREATE TABLE t (a INTEGER);")}}
	db, err := Open(ctx, path, v1)
	if err != nil || db.SchemaVersion() != 1 {
		t.Fatalf("open: %v (version %d)", err, db.SchemaVersion())
	}
	db.Close()

	v2 := fstest.MapFS{
		"0001_init.sql": v1["0001_init.sql"],
		"0002_more.sql": {Data: []byte("ALTER TABLE t ADD COLUMN b TEXT;")},
	}
	if db, err = Open(ctx, path, v2); err != nil || db.SchemaVersion() != 2 {
		t.Fatalf("upgrade: %v", err)
	}
	db.Close()
	if db, err = Open(ctx, path, v2); err != nil || db.SchemaVersion() != 2 {
		t.Fatalf("reopen must apply nothing: %v", err)
	}
	db.Close()
	if _, err := Open(ctx, path, v1); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("older binary: got %v, want ErrSchemaTooNew", err)
	}
	bad := fstest.MapFS{"0003_bad.sql": {Data: []byte("NOT SQL;")}, "0001_init.sql": v1["0001_init.sql"], "0002_more.sql": v2["0002_more.sql"]}
	if _, err := Open(ctx, path, bad); err == nil {
		t.Fatal("a failing migration must fail Open")
	}
	if db, err = Open(ctx, path, v2); err != nil || db.SchemaVersion() != 2 {
		t.Fatalf("a failed migration must leave the schema at 2: %v", err)
	}
	db.Close()
	if _, err := Open(ctx, filepath.Join(t.TempDir(), "y.db"), fstest.MapFS{"x.sql": {}}); err == nil {
		t.Fatal("a badly named migration must be an error")
	}
}

// TestMigrationsFillGap: a migration numbered below one already applied
// (two lines of work numbered theirs apart, then merged) is applied at the
// next open, once.
func TestMigrationsFillGap(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	one := fstest.MapFS{"0001_init.sql": {Data: []byte("CREATE TABLE t (a INTEGER);")}}
	three := fstest.MapFS{"0001_init.sql": one["0001_init.sql"], "0003_c.sql": {Data: []byte("ALTER TABLE t ADD COLUMN c TEXT;")}}
	db, err := Open(ctx, path, three)
	if err != nil || db.SchemaVersion() != 3 {
		t.Fatalf("open at 0003: %v", err)
	}
	db.Close()
	merged := fstest.MapFS{"0001_init.sql": one["0001_init.sql"], "0002_b.sql": {Data: []byte("ALTER TABLE t ADD COLUMN b TEXT;")},
		"0003_c.sql": three["0003_c.sql"]}
	for range 2 {
		if db, err = Open(ctx, path, merged); err != nil || db.SchemaVersion() != 3 {
			t.Fatalf("open with 0002 merged in: %v (version %d)", err, db.SchemaVersion())
		}
		var versions []int
		if err := db.db.Select(&versions, "SELECT version FROM schema_migrations ORDER BY version"); err != nil ||
			fmt.Sprint(versions) != "[1 2 3]" {
			t.Fatalf("applied %v, %v", versions, err)
		}
		if _, err := db.db.Exec("INSERT INTO t (a, b, c) VALUES (1, 'b', 'c')"); err != nil {
			t.Fatalf("0002's column: %v", err)
		}
		db.Close()
	}
}

func TestFileModes(t *testing.T) {
	o := openTestOutbox(t)
	for _, p := range []string{o.Path(), o.Path() + "-wal"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", p, fi.Mode().Perm())
		}
	}
}

func TestOutboxIntegrityFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	if err := os.WriteFile(path, []byte("this is not a database, it is a sentence of forty-odd bytes and more"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenOutbox(context.Background(), path); !errors.Is(err, ErrIntegrity) {
		t.Fatalf("a garbage outbox: got %v, want ErrIntegrity", err)
	}
	if b, _ := os.ReadFile(path); len(b) == 0 {
		t.Fatal("the garbage file must be kept for the operator")
	}
}

func TestInboxQuarantine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "inbox.db")
	if err := os.WriteFile(path, []byte("SQLite format 3\x00 but then garbage follows here........"), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := OpenInbox(context.Background(), path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	matches, _ := filepath.Glob(path + ".corrupt-*")
	if len(matches) != 1 {
		t.Fatalf("quarantined files: %v", matches)
	}
	all, err := LoadMigrations(InboxMigrations)
	if err != nil {
		t.Fatal(err)
	}
	if db.SchemaVersion() != all[len(all)-1].Version {
		t.Fatalf("the fresh inbox is at schema %d, want %d", db.SchemaVersion(), all[len(all)-1].Version)
	}
}

// TestStatusCheckEdited: migration 0005 leaves the status CHECK as
// comparisons, which still refuse an unknown status, and the file passes
// its integrity check when opened again.
func TestStatusCheckEdited(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	o, err := OpenOutbox(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	var def string
	if err := o.db.Get(&def, "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'outbox'"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(def, "status IN") || !strings.Contains(def, "status = 'aborted'") {
		t.Fatalf("outbox definition after the migrations:\n%s", def)
	}
	_, err = o.db.Exec(`INSERT INTO outbox (id, client_message_id, mesh, request_fingerprint, payload, enqueued_at,
	                    next_attempt_at, status) VALUES ('r', 'c', 'm', zeroblob(32), x'', 1, 1, 'bogus')`)
	if err == nil || !strings.Contains(err.Error(), "CHECK constraint failed") {
		t.Fatalf("a bogus status was stored (%v)", err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if o, err = OpenOutbox(context.Background(), path); err != nil {
		t.Fatalf("open again: %v", err)
	}
	o.Close()
}
