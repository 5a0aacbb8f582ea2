package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"testing"
	"testing/fstest"
)

func appendEvents(t *testing.T, in *Inbox, n int, at int64) []int64 {
	t.Helper()
	var ids []int64
	if err := run(t, in.DB, func(tx *Tx) error {
		for i := 0; i < n; i++ {
			id, err := in.AppendEvent(tx, "message", []byte(fmt.Sprintf(`{"n":%d}`, i)), at)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

func eventsAfter(t *testing.T, in *Inbox, after int64, limit int) ([]Event, error) {
	t.Helper()
	var evs []Event
	err := run(t, in.DB, func(tx *Tx) (err error) {
		evs, err = in.EventsAfter(tx, after, limit)
		return err
	})
	return evs, err
}

func trim(t *testing.T, in *Inbox, keep int, olderThan int64) int64 {
	t.Helper()
	return trimAtMost(t, in, keep, olderThan, 1000)
}

func trimAtMost(t *testing.T, in *Inbox, keep int, olderThan int64, limit int) int64 {
	t.Helper()
	var n int64
	if err := run(t, in.DB, func(tx *Tx) (err error) { n, err = in.TrimEvents(tx, keep, olderThan, limit); return err }); err != nil {
		t.Fatal(err)
	}
	return n
}

func bounds(t *testing.T, in *Inbox) (oldest int64, ok bool, last int64) {
	t.Helper()
	if err := run(t, in.DB, func(tx *Tx) (err error) {
		var v sql.NullInt64
		if err := tx.Get(&v, "SELECT MIN(id) FROM events"); err != nil {
			return err
		}
		oldest, ok = v.Int64, v.Valid
		last, err = in.LastEventID(tx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return oldest, ok, last
}

func TestEventsAppendAndRead(t *testing.T) {
	in := openTestInbox(t)
	if _, ok, last := bounds(t, in); ok || last != 0 {
		t.Fatalf("empty log: ok %v last %d", ok, last)
	}
	if evs, err := eventsAfter(t, in, 0, 10); err != nil || len(evs) != 0 {
		t.Fatalf("empty log read: %v %v", evs, err)
	}
	ids := appendEvents(t, in, 5, 1000)
	if fmt.Sprint(ids) != "[1 2 3 4 5]" {
		t.Fatalf("ids %v", ids)
	}
	evs, err := eventsAfter(t, in, 2, 2)
	if err != nil || len(evs) != 2 || evs[0].ID != 3 || evs[1].ID != 4 {
		t.Fatalf("after 2, limit 2: %+v %v", evs, err)
	}
	if e := evs[0]; e.Name != "message" || string(e.Data) != `{"n":2}` || e.CreatedAt != 1000 {
		t.Fatalf("event: %+v", e)
	}
	if evs, err := eventsAfter(t, in, 0, 0); err != nil || len(evs) != 5 {
		t.Fatalf("whole log: %d %v", len(evs), err)
	}
	if evs, err := eventsAfter(t, in, 5, 10); err != nil || len(evs) != 0 {
		t.Fatalf("caught up: %v %v", evs, err)
	}
	for _, bad := range []struct {
		name string
		data string
	}{{"", `{}`}, {"a\nb", `{}`}, {"x", "{\n}"}, {"x", `{`}, {"x", ``}} {
		err := run(t, in.DB, func(tx *Tx) error { _, err := in.AppendEvent(tx, bad.name, []byte(bad.data), 1); return err })
		if err == nil {
			t.Errorf("AppendEvent(%q, %q): want an error", bad.name, bad.data)
		}
	}
}

// TestEventIDsNeverReused: ids keep increasing across trims that empty the
// log and across a rolled-back append.
func TestEventIDsNeverReused(t *testing.T) {
	in := openTestInbox(t)
	appendEvents(t, in, 3, 1)
	if n := trim(t, in, 1, 0); n != 2 {
		t.Fatalf("trimmed %d, want 2", n)
	}
	in.db.MustExec("DELETE FROM events") // the newest row too
	if got := appendEvents(t, in, 1, 2); got[0] != 4 {
		t.Fatalf("id after emptying the log = %d, want 4", got[0])
	}
	// A command that fails after appending leaves no event and no gap.
	b := mustBegin(t, in.DB)
	err := b.Do(func(tx *Tx) error {
		if _, err := in.AppendEvent(tx, "message", []byte(`{}`), 3); err != nil {
			return err
		}
		return errors.New("fail")
	})
	if err == nil {
		t.Fatal("want the command's error")
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := appendEvents(t, in, 2, 3); fmt.Sprint(got) != "[5 6]" {
		t.Fatalf("ids after a rolled-back append: %v, want [5 6]", got)
	}
	prev := int64(0)
	evs, err := eventsAfter(t, in, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.ID != prev+1 && prev != 0 {
			t.Fatalf("gap in the log: %d after %d", e.ID, prev)
		}
		prev = e.ID
	}
}

func TestTrimEvents(t *testing.T) {
	for _, c := range []struct {
		name      string
		keep      int
		olderThan int64
		trimmed   int64
		oldest    int64 // 0: empty
	}{
		{"no bounds", 0, 0, 0, 1},
		{"count", 4, 0, 6, 7},
		{"count above size", 100, 0, 0, 1},
		{"age", 0, 300, 5, 6}, // ids 1-5 created at 100..200 (see below)
		{"age before all", 0, 50, 0, 1},
		{"both, count wins", 2, 300, 8, 9},
		{"both, age wins", 8, 300, 5, 6},
		{"age after all", 0, 10_000, 10, 0},
		// id 4 is stamped "from the future" (clock went back after it): the
		// cut still removes the whole prefix up to the newest old event.
		{"clock went back", 0, 250, 5, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := openTestInbox(t)
			appendEvents(t, in, 3, 100)  // 1-3
			appendEvents(t, in, 2, 200)  // 4-5
			appendEvents(t, in, 5, 1000) // 6-10
			in.db.MustExec("UPDATE events SET created_at = 5000 WHERE id = 4")
			if n := trim(t, in, c.keep, c.olderThan); n != c.trimmed {
				t.Fatalf("trimmed %d, want %d", n, c.trimmed)
			}
			oldest, ok, last := bounds(t, in)
			if last != 10 || ok != (c.oldest != 0) || (ok && oldest != c.oldest) {
				t.Fatalf("oldest %d (%v), last %d; want oldest %d, last 10", oldest, ok, last, c.oldest)
			}
		})
	}
}

// TestTrimEventsAtMost: a trim deletes at most its limit, always a prefix,
// and the next call goes on from there.
func TestTrimEventsAtMost(t *testing.T) {
	in := openTestInbox(t)
	appendEvents(t, in, 10, 100)
	for _, want := range []struct{ trimmed, oldest int64 }{{4, 5}, {4, 9}, {1, 10}, {0, 10}} {
		if n := trimAtMost(t, in, 1, 0, 4); n != want.trimmed {
			t.Fatalf("trimmed %d, want %d", n, want.trimmed)
		}
		if oldest, _, _ := bounds(t, in); oldest != want.oldest {
			t.Fatalf("oldest %d after the trim, want %d", oldest, want.oldest)
		}
	}
}

func TestEventsGone(t *testing.T) {
	in := openTestInbox(t)
	appendEvents(t, in, 10, 1)
	trim(t, in, 5, 0) // log holds 6..10
	for _, c := range []struct {
		after int64
		gone  bool
		first int64
	}{
		{0, true, 0}, {4, true, 0}, {5, false, 6}, {7, false, 8}, {10, false, 0}, {11, true, 0}, {-1, true, 0},
	} {
		evs, err := eventsAfter(t, in, c.after, 0)
		if c.gone {
			if !errors.Is(err, ErrEventsGone) || evs != nil {
				t.Errorf("after %d: %v, want ErrEventsGone", c.after, err)
			}
			continue
		}
		if err != nil || (c.first != 0 && (len(evs) == 0 || evs[0].ID != c.first)) || (c.first == 0 && len(evs) != 0) {
			t.Errorf("after %d: %+v %v, want first %d", c.after, evs, err, c.first)
		}
	}
	// Everything trimmed: only a client that saw the last id is up to date.
	trim(t, in, 0, 10_000)
	if evs, err := eventsAfter(t, in, 10, 0); err != nil || len(evs) != 0 {
		t.Fatalf("empty log, client at last id: %v %v", evs, err)
	}
	if _, err := eventsAfter(t, in, 9, 0); !errors.Is(err, ErrEventsGone) {
		t.Fatalf("empty log, client behind: %v, want ErrEventsGone", err)
	}
}

// TestInboxMigrationUpgrade: an inbox.db written by a binary that knew
// only 0001 opens, is upgraded to the events log, and keeps its rows.
func TestInboxMigrationUpgrade(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "inbox.db")
	v1, err := InboxMigrations.Open("0001_inbox.sql")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(v1)
	v1.Close()
	if err != nil {
		t.Fatal(err)
	}
	old, err := Open(ctx, path, fstest.MapFS{"0001_inbox.sql": {Data: body}})
	if err != nil || old.SchemaVersion() != 1 {
		t.Fatalf("open at 0001: %v", err)
	}
	old.db.MustExec(`INSERT INTO inbox (id, client_message_id, mesh, sender_pubkey, sender_name, received_at)
	                 VALUES ('01A', 'c1', 'm', 'pk', 'alice', 7)`)
	old.Close()

	db, err := OpenInbox(ctx, path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if db.SchemaVersion() < 2 {
		t.Fatalf("schema version %d after upgrade", db.SchemaVersion())
	}
	in, err := NewInbox(db)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	defer in.Close()
	if rows, _, err := list(t, in, InboxQuery{}); err != nil || rowIDs(rows) != "01A" {
		t.Fatalf("rows after upgrade: %v %v", rows, err)
	}
	// 0003: the dedupe key is per mesh now; 0007: per sender too.
	same := inboxRow("01B", "c1", 8)
	same.SenderPubkey = "pk"
	if insert(t, in, same) {
		t.Fatal("c1 again from pk in mesh m was stored")
	}
	same.Mesh = "other"
	if !insert(t, in, same) {
		t.Fatal("c1 in another mesh was deduplicated after the upgrade")
	}
	other := inboxRow("01C", "c1", 9)
	if !insert(t, in, other) {
		t.Fatal("c1 from another sender in mesh m was deduplicated after the upgrade")
	}
	if ids := appendEvents(t, in, 2, 1); fmt.Sprint(ids) != "[1 2]" {
		t.Fatalf("events after upgrade: %v", ids)
	}
	var idx []string
	if err := in.db.Select(&idx, `SELECT name || ':' || COALESCE(sql, '') FROM sqlite_master WHERE type = 'index'
	                               AND name NOT LIKE 'sqlite_autoindex%' ORDER BY name`); err != nil {
		t.Fatal(err)
	}
	want := "[inbox_held:CREATE INDEX inbox_held ON inbox(mesh, sender_pubkey, held_until) WHERE held_until IS NOT NULL " +
		"inbox_received_at:CREATE INDEX inbox_received_at ON inbox(received_at) " +
		"inbox_sender:CREATE INDEX inbox_sender ON inbox(sender_pubkey) " +
		"inbox_thread:CREATE INDEX inbox_thread ON inbox(thread_id) WHERE thread_id IS NOT NULL " +
		"inbox_topic:CREATE INDEX inbox_topic ON inbox(topic) WHERE topic IS NOT NULL " +
		"inbox_unacked:CREATE INDEX inbox_unacked ON inbox(mesh, received_at) WHERE ack_required = 1 AND acked_at IS NULL " +
		"inbox_unseen:CREATE INDEX inbox_unseen ON inbox(mesh, received_at) WHERE seen_at IS NULL]"
	// 0005: no events_created_at, inbox_topic partial; 0006: inbox_unseen; 0007 and 0008 rebuilt them, 0008
	// added the mail ones
	if fmt.Sprint(idx) != want {
		t.Fatalf("indexes after upgrade:\n%v\nwant\n%s", idx, want)
	}
}

// TestOutboxMigrationUpgrade: an outbox.db written by 0001 alone keeps its
// rows and gains dead_at.
func TestOutboxMigrationUpgrade(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outbox.db")
	f, err := OutboxMigrations.Open("0001_outbox.sql")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	old, err := Open(ctx, path, fstest.MapFS{"0001_outbox.sql": {Data: body}})
	if err != nil {
		t.Fatal(err)
	}
	old.db.MustExec(`INSERT INTO outbox (id, client_message_id, mesh, request_fingerprint, payload, enqueued_at,
	                 next_attempt_at, status) VALUES ('row-a', 'a', 'm', zeroblob(32), x'7b7d', 1, 1, 'inflight')`)
	old.Close()
	o, err := OpenOutbox(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if err := run(t, o.DB, func(tx *Tx) error { return o.MarkDead(tx, "row-a", "rejected", 9) }); err != nil {
		t.Fatal(err)
	}
	if s := state(t, o, "row-a"); s.Status != "dead" || s.DeadAt == nil || *s.DeadAt != 9 {
		t.Fatalf("after upgrade: %+v", s)
	}
}

// TestEventIDGapOnReopen: an open moves the id sequence EventIDGap on, so
// ids a power cut took back (published, never on disk) are not issued
// again; a client that saw one resumes without a loss, and the trim and
// the resume check count rows, not ids.
func TestEventIDGapOnReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.db")
	in := openInboxAt(t, path)
	appendEvents(t, in, 5, 1) // 1..5
	// A power cut loses 4 and 5 after a client was shown them.
	in.db.MustExec("DELETE FROM events WHERE id > 3")
	in.db.MustExec("UPDATE sqlite_sequence SET seq = 3 WHERE name = 'events'")
	in.Close()

	in = openInboxAt(t, path)
	defer in.Close()
	next := int64(3 + EventIDGap + 1)
	if ids := appendEvents(t, in, 2, 2); fmt.Sprint(ids) != fmt.Sprint([]int64{next, next + 1}) {
		t.Fatalf("ids after reopen: %v, want from %d", ids, next)
	}
	for _, after := range []int64{3, 5} { // the last durable id; a lost one
		evs, err := eventsAfter(t, in, after, 0)
		if err != nil || len(evs) != 2 || evs[0].ID != next {
			t.Fatalf("after %d: %+v %v, want from %d", after, evs, err, next)
		}
	}
	if evs, err := eventsAfter(t, in, 2, 0); err != nil || len(evs) != 3 || evs[0].ID != 3 {
		t.Fatalf("after 2: %+v %v", evs, err)
	}
	// Keep the 2 newest: the hole counts for nothing.
	if n := trim(t, in, 2, 0); n != 3 {
		t.Fatalf("trimmed %d, want 3", n)
	}
	if _, err := eventsAfter(t, in, 2, 0); !errors.Is(err, ErrEventsGone) {
		t.Fatalf("after 2 once 3 is trimmed: %v, want ErrEventsGone", err)
	}
	if evs, err := eventsAfter(t, in, 3, 0); err != nil || len(evs) != 2 {
		t.Fatalf("after 3 once 1..3 are trimmed: %+v %v", evs, err)
	}
}

// TestEventsTrimmedMigration: 0004 records what a log written before it
// had trimmed.
func TestEventsTrimmedMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "inbox.db")
	upTo3 := fstest.MapFS{}
	for _, name := range []string{"0001_inbox.sql", "0002_events.sql", "0003_dedupe_per_mesh.sql"} {
		body, err := fs.ReadFile(InboxMigrations, name)
		if err != nil {
			t.Fatal(err)
		}
		upTo3[name] = &fstest.MapFile{Data: body}
	}
	old, err := Open(ctx, path, upTo3)
	if err != nil || old.SchemaVersion() != 3 {
		t.Fatalf("open at 0003: %v", err)
	}
	for i := 0; i < 10; i++ {
		old.db.MustExec(`INSERT INTO events (name, data, created_at) VALUES ('message', '{}', 1)`)
	}
	old.db.MustExec(`DELETE FROM events WHERE id <= 6`)
	old.Close()

	in := openInboxAt(t, path)
	defer in.Close()
	if _, err := eventsAfter(t, in, 5, 0); !errors.Is(err, ErrEventsGone) {
		t.Fatalf("after 5: %v, want ErrEventsGone", err)
	}
	if evs, err := eventsAfter(t, in, 6, 0); err != nil || len(evs) != 4 {
		t.Fatalf("after 6: %+v %v", evs, err)
	}
}
