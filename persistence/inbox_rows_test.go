package persistence

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func openTestInbox(t *testing.T) *Inbox {
	t.Helper()
	in := openInboxAt(t, filepath.Join(t.TempDir(), "inbox.db"))
	t.Cleanup(func() { in.Close() })
	return in
}

// openInboxAt opens the inbox at path; the caller closes it.
func openInboxAt(t *testing.T, path string) *Inbox {
	t.Helper()
	db, err := OpenInbox(context.Background(), path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	in, err := NewInbox(db)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	return in
}

func ptr(s string) *string { return &s }

func inboxRow(id, cid string, at int64) *InboxRow {
	return &InboxRow{ID: id, ClientMessageID: cid, BrokerMessageID: ptr("bm-" + id), Mesh: "m",
		SenderPubkey: "pk1", SenderName: "alice", Body: ptr("hello " + id), ReceivedAt: at}
}

func insert(t *testing.T, in *Inbox, row *InboxRow) bool {
	t.Helper()
	var ok bool
	if err := run(t, in.DB, func(tx *Tx) (err error) {
		ok, err = in.Insert(tx, row)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ok
}

func list(t *testing.T, in *Inbox, q InboxQuery) ([]InboxRow, string, error) {
	t.Helper()
	var rows []InboxRow
	var next string
	err := run(t, in.DB, func(tx *Tx) (err error) {
		rows, next, err = in.List(tx, q)
		return err
	})
	return rows, next, err
}

func rowIDs(rows []InboxRow) string {
	var s []string
	for _, r := range rows {
		s = append(s, r.ID)
	}
	return strings.Join(s, ",")
}

func TestInboxInsertRoundTrip(t *testing.T) {
	in := openTestInbox(t)
	full := &InboxRow{ID: "01A", ClientMessageID: "cid-1", BrokerMessageID: ptr("bm-1"), Mesh: "m", Topic: ptr("ops"),
		SenderPubkey: "pk1", SenderName: "alice", Body: ptr("hi"), Meta: ptr(`{"k":1}`), ReceivedAt: 42,
		ReplyToID: ptr("r-0")}
	failed := &InboxRow{ID: "01B", ClientMessageID: InboxDedupeKey("", "bm-2"), BrokerMessageID: ptr("bm-2"),
		Mesh: "m", SenderPubkey: "pk2", SenderName: "bob", Meta: ptr(`{"decrypt_error":"stale_key"}`), ReceivedAt: 43}
	for _, r := range []*InboxRow{full, failed} {
		if !insert(t, in, r) {
			t.Fatalf("%s: not inserted", r.ID)
		}
	}
	rows, next, err := list(t, in, InboxQuery{})
	if err != nil || next != "" || len(rows) != 2 {
		t.Fatalf("list: %d rows, next %q, %v", len(rows), next, err)
	}
	if !reflect.DeepEqual(rows[0], *full) || !reflect.DeepEqual(rows[1], *failed) {
		t.Fatalf("round trip:\n got %+v\n     %+v", rows[0], rows[1])
	}
	if rows[1].ClientMessageID != "broker:bm-2" || rows[1].Body != nil || rows[1].Topic != nil {
		t.Fatalf("fallback row: %+v", rows[1])
	}
}

func TestInboxDedupeKey(t *testing.T) {
	for _, c := range []struct{ cid, bm, want string }{
		{"c", "b", "c"}, {"c", "", "c"}, {"", "b", "broker:b"}, {"", "", ""},
	} {
		if got := InboxDedupeKey(c.cid, c.bm); got != c.want {
			t.Errorf("InboxDedupeKey(%q, %q) = %q, want %q", c.cid, c.bm, got, c.want)
		}
	}
}

// TestInboxDedupe: a second insert with the same client_message_id is a
// no-op, whatever else differs, inside one batch or across batches.
func TestInboxDedupe(t *testing.T) {
	in := openTestInbox(t)
	if !insert(t, in, inboxRow("01A", "cid", 10)) {
		t.Fatal("first insert: not inserted")
	}
	again := inboxRow("01B", "cid", 99)
	again.Body = ptr("different")
	if insert(t, in, again) {
		t.Fatal("second insert reported a new row")
	}
	err := run(t, in.DB, func(tx *Tx) error {
		first, err := in.Insert(tx, inboxRow("01C", "cid2", 20))
		if err != nil || !first {
			return fmt.Errorf("insert in batch: %v %v", first, err)
		}
		dup, err := in.Insert(tx, inboxRow("01D", "cid2", 21))
		if err != nil || dup {
			return fmt.Errorf("duplicate in the same batch: %v %v", dup, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, _, err := list(t, in, InboxQuery{})
	if err != nil || rowIDs(rows) != "01A,01C" || *rows[0].Body != "hello 01A" || rows[0].ReceivedAt != 10 {
		t.Fatalf("rows after duplicates: %s %+v %v", rowIDs(rows), rows, err)
	}
	// The key is per mesh: the same message reaching two memberships (two
	// agents of this machine, or one id sent to two meshes) is stored for each.
	other := inboxRow("01E", "cid", 30)
	other.Mesh = "agent-b"
	if !insert(t, in, other) {
		t.Fatal("the same client_message_id in another mesh was deduplicated")
	}
	if rows, _, _ := list(t, in, InboxQuery{Mesh: "agent-b"}); rowIDs(rows) != "01E" {
		t.Fatalf("agent-b's rows: %s", rowIDs(rows))
	}
	for _, bad := range []*InboxRow{inboxRow("", "x", 1), inboxRow("01Z", "", 1)} {
		if err := run(t, in.DB, func(tx *Tx) error { _, err := in.Insert(tx, bad); return err }); err == nil {
			t.Errorf("insert %+v: want an error", bad)
		}
	}
	// A clash on the row id (not the dedupe key) is an error, not a no-op.
	if err := run(t, in.DB, func(tx *Tx) error { _, err := in.Insert(tx, inboxRow("01A", "cid9", 1)); return err }); err == nil {
		t.Fatal("duplicate row id: want an error")
	}
}

// TestInboxPaging walks every page size over rows with many received_at
// ties, and checks that the pages concatenate to the full ordered list.
func TestInboxPaging(t *testing.T) {
	in := openTestInbox(t)
	var want []string
	n := 0
	for at := int64(100); at < 106; at++ {
		for k := 0; k < 4; k++ { // four rows per millisecond, inserted in reverse id order
			id := fmt.Sprintf("%d-%d", at, 3-k)
			insert(t, in, inboxRow(id, "c"+id, at))
			n++
		}
		for k := 0; k < 4; k++ {
			want = append(want, fmt.Sprintf("%d-%d", at, k))
		}
	}
	for limit := 1; limit <= n+1; limit++ {
		var got []string
		after, pages := "", 0
		for {
			rows, next, err := list(t, in, InboxQuery{Limit: limit, After: after})
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if len(rows) > limit || (next != "" && len(rows) != limit) {
				t.Fatalf("limit %d: page of %d rows, next %q", limit, len(rows), next)
			}
			for _, r := range rows {
				got = append(got, r.ID)
			}
			if next == "" {
				break
			}
			after = next
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("limit %d: got %v\nwant %v", limit, got, want)
		}
		if wantPages := max(1, (n+limit-1)/limit); pages != wantPages {
			t.Fatalf("limit %d: %d pages", limit, pages)
		}
	}
	// The last full page has no next when nothing follows it.
	if _, next, _ := list(t, in, InboxQuery{Limit: n}); next != "" {
		t.Fatalf("exactly %d rows with limit %d: next %q, want none", n, n, next)
	}
}

func TestInboxLimits(t *testing.T) {
	in := openTestInbox(t)
	err := run(t, in.DB, func(tx *Tx) error {
		for i := 0; i < MaxInboxLimit+5; i++ {
			if _, err := in.Insert(tx, inboxRow(fmt.Sprintf("%05d", i), fmt.Sprintf("c%d", i), int64(i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ limit, want int }{
		{0, DefaultInboxLimit}, {-1, DefaultInboxLimit}, {7, 7}, {MaxInboxLimit, MaxInboxLimit}, {5000, MaxInboxLimit},
	} {
		rows, next, err := list(t, in, InboxQuery{Limit: c.limit})
		if err != nil || len(rows) != c.want || next == "" {
			t.Errorf("limit %d: %d rows (next %q, %v), want %d", c.limit, len(rows), next, err, c.want)
		}
	}
}

func TestInboxFilters(t *testing.T) {
	in := openTestInbox(t)
	rows := []*InboxRow{
		{ID: "1", ClientMessageID: "c1", Mesh: "m", SenderPubkey: "pkA", SenderName: "a", ReceivedAt: 10},
		{ID: "2", ClientMessageID: "c2", Mesh: "m", Topic: ptr("ops"), SenderPubkey: "pkB", SenderName: "b", ReceivedAt: 20},
		{ID: "3", ClientMessageID: "c3", Mesh: "n", Topic: ptr("ops"), SenderPubkey: "pkA", SenderName: "a", ReceivedAt: 30},
		{ID: "4", ClientMessageID: "c4", Mesh: "n", Topic: ptr("dev"), SenderPubkey: "pkB", SenderName: "b", ReceivedAt: 40},
		{ID: "5", ClientMessageID: "c5", Mesh: "m", Topic: ptr("ops"), SenderPubkey: "pkA", SenderName: "a", ReceivedAt: 50},
	}
	for _, r := range rows {
		insert(t, in, r)
	}
	for _, c := range []struct {
		name string
		q    InboxQuery
		want string
	}{
		{"all", InboxQuery{}, "1,2,3,4,5"},
		{"since inclusive", InboxQuery{Since: 30}, "3,4,5"},
		{"since after all", InboxQuery{Since: 51}, ""},
		{"topic", InboxQuery{Topic: "ops"}, "2,3,5"},
		{"from", InboxQuery{From: "pkA"}, "1,3,5"},
		{"mesh", InboxQuery{Mesh: "n"}, "3,4"},
		{"combined", InboxQuery{Since: 20, Topic: "ops", From: "pkA", Mesh: "m"}, "5"},
		{"no match", InboxQuery{From: "pkZ"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, next, err := list(t, in, c.q)
			if err != nil || rowIDs(got) != c.want || next != "" {
				t.Fatalf("got %q next %q (%v), want %q", rowIDs(got), next, err, c.want)
			}
			// The same filter paged one row at a time gives the same rows.
			var paged []InboxRow
			q := c.q
			q.Limit = 1
			for {
				page, next, err := list(t, in, q)
				if err != nil {
					t.Fatal(err)
				}
				paged = append(paged, page...)
				if next == "" {
					break
				}
				q.After = next
			}
			if rowIDs(paged) != c.want {
				t.Fatalf("paged: %q, want %q", rowIDs(paged), c.want)
			}
		})
	}
}

func TestInboxBadCursor(t *testing.T) {
	in := openTestInbox(t)
	insert(t, in, inboxRow("1", "c1", 1))
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, c := range []string{"!!!", "a b", b64("nocolon"), b64("12:"), b64("x:01A"), b64(":01A"), b64("1.5:01A"),
		base64.StdEncoding.EncodeToString([]byte("10:01A/+"))} {
		rows, _, err := list(t, in, InboxQuery{After: c})
		if !errors.Is(err, ErrBadCursor) || rows != nil {
			t.Errorf("cursor %q: %v, want ErrBadCursor", c, err)
		}
	}
	if rows, _, err := list(t, in, InboxQuery{After: b64("0:0")}); err != nil || len(rows) != 1 {
		t.Fatalf("a well-formed cursor: %d rows, %v", len(rows), err)
	}
}

func TestInboxPrune(t *testing.T) {
	in := openTestInbox(t)
	for i, at := range []int64{10, 20, 30, 40} {
		insert(t, in, inboxRow(fmt.Sprint(i), fmt.Sprint("c", i), at))
	}
	var n int64
	prune := func(limit int) {
		t.Helper()
		if err := run(t, in.DB, func(tx *Tx) (err error) { n, err = in.Prune(tx, 30, limit); return err }); err != nil {
			t.Fatal(err)
		}
	}
	prune(1) // at most one, the oldest
	if rows, _, _ := list(t, in, InboxQuery{}); n != 1 || rowIDs(rows) != "1,2,3" {
		t.Fatalf("pruned %d at most 1: %s", n, rowIDs(rows))
	}
	prune(10)
	if rows, _, _ := list(t, in, InboxQuery{}); n != 1 || rowIDs(rows) != "2,3" {
		t.Fatalf("pruned %d, then: %s", n, rowIDs(rows))
	}
	// A pruned dedupe key is free again (the broker's history is the truth).
	if !insert(t, in, inboxRow("9", "c0", 50)) {
		t.Fatal("re-insert after prune: not inserted")
	}
}
