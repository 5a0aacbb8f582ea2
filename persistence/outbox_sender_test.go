package persistence

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/claudemesh/claudemesh-go/messages"
)

// acceptAs is an accept of id by sender mesh: its request fingerprint is
// spec scoped to mesh, as the IPC server computes it.
func acceptAs(t *testing.T, o *Outbox, mesh, id string, spec messages.Fingerprint) *messages.AcceptResult {
	t.Helper()
	var res *messages.AcceptResult
	if err := run(t, o.DB, func(tx *Tx) (err error) {
		res, err = o.Accept(tx, &messages.AcceptSend{Mesh: mesh, ClientMessageID: id, RowID: "row-" + mesh + "-" + id,
			Fingerprint: spec.Scoped(mesh), SpecFingerprint: spec, Payload: []byte(`{"type":"send","id":"` + id + `"}`), Now: 1}, false)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return res
}

func listOutbox(t *testing.T, o *Outbox, q *messages.ListOutbox) []messages.OutboxItem {
	t.Helper()
	var page *messages.OutboxPage
	if err := run(t, o.DB, func(tx *Tx) (err error) { page, err = o.List(tx, q); return err }); err != nil {
		t.Fatal(err)
	}
	return page.Items
}

// TestClientMessageIDPerSender: a client_message_id belongs to its sender
// (the row's mesh). Two senders using one id get a row each and never see
// each other's: neither the insert, nor the §4.5 answer, nor the listing
// by id, nor a requeue's new id, nor a drop.
func TestClientMessageIDPerSender(t *testing.T) {
	o := openTestOutbox(t)
	spec := messages.Fingerprint{7}
	for _, mesh := range []string{"local", "reviewer", "local/session-1"} {
		if r := acceptAs(t, o, mesh, "xm-1", spec); !r.Inserted || r.Outcome != messages.AcceptQueued {
			t.Fatalf("%s: %+v, want a new row", mesh, r)
		}
	}
	if n := count(t, o, "client_message_id = 'xm-1'"); n != 3 {
		t.Fatalf("%d rows for xm-1, want one per sender", n)
	}
	// Each sender's row answers its own retries, whatever the others' state.
	o.db.MustExec(`UPDATE outbox SET status = 'done', broker_message_id = 'bm-local' WHERE mesh = 'local'`)
	if r := acceptAs(t, o, "local", "xm-1", spec); r.Outcome != messages.AcceptDuplicate || *r.BrokerMessageID != "bm-local" {
		t.Fatalf("local's retry: %+v", r)
	}
	if r := acceptAs(t, o, "reviewer", "xm-1", spec); r.Inserted || r.Outcome != messages.AcceptQueued {
		t.Fatalf("reviewer's retry: %+v, want its own pending row", r)
	}
	if r := acceptAs(t, o, "reviewer", "xm-1", messages.Fingerprint{8}); r.Outcome != messages.AcceptConflict ||
		r.Conflict != "outbox_pending_fingerprint_mismatch" {
		t.Fatalf("reviewer, other body: %+v", r)
	}
	// A row compared with another sender's request never matches, even were
	// it found: the fingerprint covers the sender.
	if spec.Scoped("local") == spec.Scoped("reviewer") || spec.Scoped("local") == spec {
		t.Fatal("the scoped fingerprint does not depend on the sender")
	}

	if items := listOutbox(t, o, &messages.ListOutbox{ClientMessageID: "xm-1", Limit: 10}); len(items) != 3 {
		t.Fatalf("by id alone: %d rows, want 3", len(items))
	}
	items := listOutbox(t, o, &messages.ListOutbox{ClientMessageID: "xm-1", Mesh: "reviewer", Limit: 10})
	if len(items) != 1 || items[0].Mesh != "reviewer" || items[0].Status != messages.StatusPending {
		t.Fatalf("by id and mesh: %+v", items)
	}
	if items := listOutbox(t, o, &messages.ListOutbox{Mesh: "local/session-1", Limit: 10}); len(items) != 1 {
		t.Fatalf("by mesh: %+v", items)
	}

	// A requeue's new id must be free for the successor's sender only.
	acceptAs(t, o, "local", "xm-2", spec)
	o.db.MustExec(`UPDATE outbox SET status = 'dead' WHERE mesh = 'reviewer'`)
	var res *messages.RequeueResult
	err := run(t, o.DB, func(tx *Tx) (err error) {
		res, err = o.Requeue(tx, &messages.RequeueOutbox{ID: "row-reviewer-xm-1", NewRowID: "succ", NewClientMessageID: "xm-2", Now: 5})
		return err
	})
	if err != nil || count(t, o, "id = 'succ' AND mesh = 'reviewer' AND client_message_id = 'xm-2'") != 1 {
		t.Fatalf("requeue to an id another sender uses: %+v %v", res, err)
	}
	o.db.MustExec(`UPDATE outbox SET status = 'dead' WHERE id = 'succ'`)
	err = run(t, o.DB, func(tx *Tx) error {
		_, err := o.Requeue(tx, &messages.RequeueOutbox{ID: "succ", NewRowID: "succ2", NewClientMessageID: "xm-1", Now: 6})
		return err
	})
	if me := (*messages.Error)(nil); !errors.As(err, &me) || me.Code != messages.CodeClientIDInUse {
		t.Fatalf("requeue to the sender's own used id: %v, want %s", err, messages.CodeClientIDInUse)
	}

	// A scoped requeue or drop does not find another sender's row.
	err = run(t, o.DB, func(tx *Tx) error {
		_, err := o.Drop(tx, &messages.DropOutbox{ID: "succ", Scope: "local/session-1", Now: 7})
		return err
	})
	if me := (*messages.Error)(nil); !errors.As(err, &me) || me.Code != messages.CodeRowNotFound {
		t.Fatalf("a session dropping another sender's row: %v", err)
	}
	if count(t, o, "id = 'succ' AND status = 'dead'") != 1 {
		t.Fatal("the row changed")
	}
}

// outboxFS is the outbox migrations up to and including version upTo.
func outboxFS(t *testing.T, upTo int) fstest.MapFS {
	t.Helper()
	all, err := LoadMigrations(OutboxMigrations)
	if err != nil {
		t.Fatal(err)
	}
	out := fstest.MapFS{}
	for _, m := range all {
		if m.Version <= upTo {
			out[fmt.Sprintf("%04d_%s.sql", m.Version, m.Name)] = &fstest.MapFile{Data: []byte(m.SQL)}
		}
	}
	return out
}

// TestOutboxMigrationPerSender: an outbox.db written before 0006 (id
// unique daemon-wide, §4.3 fingerprints) is rebuilt without losing a row
// or changing one: every column of every row, in every state, survives;
// the indexes are those of the latest migrations; the id becomes the
// sender's; and a retry of an old row is still the same request.
func TestOutboxMigrationPerSender(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outbox.db")
	old, err := Open(ctx, path, outboxFS(t, 5))
	if err != nil || old.SchemaVersion() != 5 {
		t.Fatalf("open at 0005: %v", err)
	}
	spec := messages.Fingerprint{9}
	for i, st := range []string{"pending", "inflight", "done", "dead", "aborted"} {
		old.db.MustExec(`INSERT INTO outbox (id, client_message_id, mesh, request_fingerprint, payload, enqueued_at, attempts,
		                 next_attempt_at, status, last_error, delivered_at, broker_message_id, history_id, aborted_at,
		                 aborted_by, superseded_by, dead_at)
		                 VALUES (?, ?, ?, ?, x'7b7d', ?, ?, ?, ?, 'why', 40, 'bm', 'h', 50, 'operator', 'next', 60)`,
			"row-"+st, "old-"+st, "local", spec[:], 10+i, i, 20+i, st)
	}
	type row struct {
		ID, ClientMessageID, Mesh, Status, LastError, BrokerMessageID, HistoryID, AbortedBy, SupersededBy string
		Fingerprint, Payload                                                                              []byte
		EnqueuedAt, Attempts, NextAttemptAt, DeliveredAt, AbortedAt, DeadAt                               int64
	}
	const cols = `SELECT id AS id, client_message_id AS clientmessageid, mesh AS mesh, status AS status,
	       last_error AS lasterror, broker_message_id AS brokermessageid, history_id AS historyid,
	       aborted_by AS abortedby, superseded_by AS supersededby, request_fingerprint AS fingerprint,
	       payload AS payload, enqueued_at AS enqueuedat, attempts AS attempts, next_attempt_at AS nextattemptat,
	       delivered_at AS deliveredat, aborted_at AS abortedat, dead_at AS deadat FROM outbox ORDER BY id`
	var before []row
	if err := old.db.Select(&before, cols); err != nil || len(before) != 5 {
		t.Fatalf("rows before: %v %v", before, err)
	}
	old.Close()

	o, err := OpenOutbox(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.SchemaVersion() < 6 {
		t.Fatalf("schema %d after the upgrade", o.SchemaVersion())
	}
	var after []row
	if err := o.db.Select(&after, cols); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("rows after the upgrade:\n%v\nwant\n%v", after, before)
	}
	if n := count(t, o, "fingerprint_version = 1"); n != 5 {
		t.Fatalf("%d old rows marked as §4.3 fingerprints, want 5", n)
	}

	var idx []string
	if err := o.db.Select(&idx, `SELECT name || ':' || COALESCE(sql, '') FROM sqlite_master WHERE type = 'index'
	                              AND tbl_name = 'outbox' ORDER BY name`); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"outbox_aborted:CREATE INDEX outbox_aborted ON outbox(status, aborted_at) WHERE status = 'aborted'",
		"outbox_awaiting_ack:CREATE INDEX outbox_awaiting_ack ON outbox(enqueued_at) WHERE ack_required = 1", // 0009
		"outbox_done_payload:CREATE INDEX outbox_done_payload ON outbox(delivered_at) WHERE status = 'done' AND length(payload) > 0",
		"outbox_queue:CREATE INDEX outbox_queue ON outbox(status, mesh, enqueued_at, id, next_attempt_at)\n  WHERE status = 'pending' OR status = 'inflight'",
		"outbox_thread:CREATE INDEX outbox_thread ON outbox(thread_id) WHERE thread_id IS NOT NULL", // 0009
	}
	var ours []string
	for _, i := range idx {
		if !strings.HasPrefix(i, "sqlite_autoindex_") {
			ours = append(ours, i)
		}
	}
	if fmt.Sprint(ours) != fmt.Sprint(want) {
		t.Fatalf("indexes after the upgrade:\n%q\nwant\n%q", ours, want)
	}
	fresh := openTestOutbox(t)
	var freshIdx []string
	if err := fresh.db.Select(&freshIdx, `SELECT name || ':' || COALESCE(sql, '') FROM sqlite_master WHERE type = 'index'
	                                       AND tbl_name = 'outbox' ORDER BY name`); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(freshIdx) != fmt.Sprint(idx) {
		t.Fatalf("an upgraded file's indexes %q differ from a new file's %q", idx, freshIdx)
	}

	// Old rows are compared in their own form: a retry after the upgrade is
	// the same request; another body is still refused.
	for st, want := range map[string]messages.AcceptOutcome{"pending": messages.AcceptQueued,
		"inflight": messages.AcceptInflight, "done": messages.AcceptDuplicate} {
		if r := acceptAs(t, o, "local", "old-"+st, spec); r.Inserted || r.Outcome != want {
			t.Errorf("retry of the old %s row: %+v, want outcome %d", st, r, want)
		}
		if r := acceptAs(t, o, "local", "old-"+st, messages.Fingerprint{1}); r.Outcome != messages.AcceptConflict ||
			r.Conflict != "outbox_"+st+"_fingerprint_mismatch" {
			t.Errorf("old %s row, other body: %+v", st, r)
		}
	}
	// The old id is the old row's sender's: another sender may use it now.
	if r := acceptAs(t, o, "reviewer", "old-done", spec); !r.Inserted {
		t.Fatalf("another sender's use of an old id: %+v", r)
	}
	if n := count(t, o, "client_message_id = 'old-done' AND fingerprint_version = 2 AND mesh = 'reviewer'"); n != 1 {
		t.Fatal("the new row is not stored with the scoped fingerprint")
	}
	// A requeue of an old row keeps its fingerprint and form.
	if err := run(t, o.DB, func(tx *Tx) error {
		_, err := o.Requeue(tx, &messages.RequeueOutbox{ID: "row-dead", NewRowID: "succ", NewClientMessageID: "old-succ", Now: 70})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if r := acceptAs(t, o, "local", "old-succ", spec); r.Inserted || r.Outcome != messages.AcceptQueued {
		t.Fatalf("retry of an old row's successor: %+v", r)
	}
	// The status CHECK survived the rebuild in its comparison form (0005).
	var def string
	if err := o.db.Get(&def, "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'outbox'"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(def, "status IN") || !strings.Contains(def, "status = 'aborted'") || !strings.Contains(def, "UNIQUE (client_message_id, mesh)") {
		t.Fatalf("outbox definition after the upgrade:\n%s", def)
	}
	if err := o.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
}
