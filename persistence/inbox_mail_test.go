package persistence

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// mailRow is a received message with a subject and a body.
func mailRow(id, subject, body string, at int64) *InboxRow {
	r := inboxRow(id, "c-"+id, at)
	r.Body = ptr(body)
	if subject != "" {
		r.Subject = ptr(subject)
	}
	return r
}

func search(t *testing.T, in *Inbox, q string, mesh string) string {
	t.Helper()
	var rows []InboxRow
	if err := run(t, in.DB, func(tx *Tx) (err error) {
		rows, err = in.Search(tx, &messages.SearchInbox{Query: q, Mesh: mesh, Limit: 10})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return rowIDs(rows)
}

// TestInboxSearch: every word is asked first, any word when nothing has
// them all; the exact phrase ranks first, then bm25 with the subject
// weighted; query text is never syntax; a message held as a contact
// request is never found; mesh scopes it; a row deleted leaves the index.
func TestInboxSearch(t *testing.T) {
	in := openTestInbox(t)
	for _, r := range []*InboxRow{
		mailRow("01A", "", "the deploy failed on staging, the build is fine", 1),
		mailRow("01B", "deploy", "failed again", 2),
		mailRow("01C", "", "deploy failed: see the logs", 3),
		mailRow("01D", "lunch", "pizza at noon", 4),
		mailRow("01E", "", "NEAR(\"a b\") OR c* -- DROP TABLE inbox", 5),
	} {
		insert(t, in, r)
	}
	other := mailRow("01F", "deploy failed", "other mesh", 6)
	other.Mesh = "n"
	insert(t, in, other)
	held := mailRow("01G", "deploy failed", "a stranger's", 7)
	until := int64(99)
	held.HeldUntil = &until
	insert(t, in, held)

	for _, c := range []struct{ q, mesh, want string }{
		{"deploy failed", "m", "01C,01A,01B"}, // the phrase (01C, 01A) first
		{"Deploy, FAILED!", "m", "01C,01A,01B"},
		{"pizza deploy", "m", "01D,01B,01C,01A"}, // none has both: any, by rank (a subject weighs twice)
		{"lunch", "m", "01D"},                    // the subject is searched
		{"deploy failed", "", "01F,01C,01A,01B"}, // every mesh; the phrase in a subject first
		{`NEAR("a b") OR c*`, "m", "01E"},
		{"'; DROP TABLE inbox; --", "m", "01E"},
		{"nothing here", "m", ""},
		{"!!", "m", ""},
		{"deploys", "m", "01B,01C,01A"}, // the porter stemmer; the subject weighs twice
	} {
		if got := search(t, in, c.q, c.mesh); got != c.want {
			t.Errorf("search %q in %q = %q, want %q", c.q, c.mesh, got, c.want)
		}
	}
	if err := run(t, in.DB, func(tx *Tx) error {
		_, err := in.DeleteRows(tx, InboxDeletion{ID: "01C"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := search(t, in, "deploy failed", "m"); got != "01A,01B" {
		t.Errorf("after a delete: %q", got)
	}
}

// TestInboxSearchNewestWhenCommon: a match of more than maxRankedInbox
// messages is answered newest first.
func TestInboxSearchNewestWhenCommon(t *testing.T) {
	in := openTestInbox(t)
	defer func(n int) { maxRankedInbox = n }(maxRankedInbox)
	maxRankedInbox = 3
	for i := range 5 {
		insert(t, in, mailRow(fmt.Sprintf("01%c", 'A'+i), "", strings.Repeat("ping ", 5-i)+"pong", int64(i)))
	}
	if got := search(t, in, "ping", "m"); got != "01E,01D,01C,01B,01A" {
		t.Errorf("a common word: %q, want newest first", got)
	}
}

// TestInboxMailFilters: a thread is its messages and its root; importance
// and unacknowledged filter; an acknowledgement is stamped once; a held
// message is never listed.
func TestInboxMailFilters(t *testing.T) {
	in := openTestInbox(t)
	root := mailRow("01A", "plan", "root", 1)
	reply := mailRow("01B", "", "reply", 2)
	reply.ThreadID, reply.Importance, reply.AckRequired = ptr("c-01A"), ptr("urgent"), true
	other := mailRow("01C", "", "elsewhere", 3)
	other.ThreadID, other.AckRequired = ptr("t9"), true
	held := mailRow("01D", "", "held", 4)
	held.ThreadID, held.HeldUntil = ptr("c-01A"), ptr64(100)
	for _, r := range []*InboxRow{root, reply, other, held} {
		insert(t, in, r)
	}
	for _, c := range []struct {
		q    InboxQuery
		want string
	}{
		{InboxQuery{}, "01A,01B,01C"},
		{InboxQuery{Thread: "c-01A"}, "01A,01B"},
		{InboxQuery{Thread: "t9"}, "01C"},
		{InboxQuery{Importance: "urgent"}, "01B"},
		{InboxQuery{Importance: "normal"}, "01A,01C"},
		{InboxQuery{Importance: "high"}, ""},
		{InboxQuery{Importance: "high,urgent"}, "01B"},
		{InboxQuery{Importance: "normal,urgent"}, "01A,01B,01C"},
		{InboxQuery{ID: "01C"}, "01C"},
		{InboxQuery{ID: "01D"}, ""},
		{InboxQuery{Unacked: true}, "01B,01C"},
	} {
		rows, _, err := list(t, in, c.q)
		if err != nil || rowIDs(rows) != c.want {
			t.Errorf("%+v: %q %v, want %q", c.q, rowIDs(rows), err, c.want)
		}
	}
	var first, again *InboxRow
	if err := run(t, in.DB, func(tx *Tx) (err error) {
		if first, err = in.MarkAcked(tx, "01B", 50); err != nil {
			return err
		}
		again, err = in.MarkAcked(tx, "01B", 60)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if first.AckedAt == nil || *first.AckedAt != 50 || *again.AckedAt != 50 {
		t.Fatalf("acked at %v then %v, want 50 both times", first.AckedAt, again.AckedAt)
	}
	if rows, _, _ := list(t, in, InboxQuery{Unacked: true}); rowIDs(rows) != "01C" {
		t.Errorf("unacked after the ack: %q", rowIDs(rows))
	}
	if it := again.Item(); it.AckedAt == nil || it.Importance != "urgent" || it.ThreadID != "c-01A" || !it.AckRequired {
		t.Errorf("the item: %+v", it)
	}
	var thread string
	var found bool
	if err := run(t, in.DB, func(tx *Tx) (err error) {
		thread, found, err = in.ThreadOf(tx, "m", "c-01B")
		return err
	}); err != nil || !found || thread != "c-01A" {
		t.Errorf("the thread of c-01B: %q %v %v", thread, found, err)
	}
}

func ptr64(v int64) *int64 { return &v }

// admit applies the policy of row's mesh to row and stores it unless it
// was refused; it returns the row's fate.
func admit(t *testing.T, in *Inbox, row *InboxRow) string {
	t.Helper()
	var refused bool
	if err := run(t, in.DB, func(tx *Tx) (err error) {
		if refused, err = in.Admit(tx, row); err != nil || refused {
			return err
		}
		_, err = in.Insert(tx, row)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	switch {
	case refused:
		return "refused"
	case row.HeldUntil != nil:
		return "held"
	}
	return "in"
}

func setPolicy(t *testing.T, in *Inbox, policy string, ttl time.Duration) {
	t.Helper()
	if err := run(t, in.DB, func(tx *Tx) error { return in.SetPolicy(tx, "m", policy, ttl, 1) }); err != nil {
		t.Fatal(err)
	}
}

// TestContactPolicies: what each policy does with a stranger's DM and a
// contact's; a held message waits as a request until accepted (it lands,
// the sender becomes a contact) or refused (dropped); an expired request
// is neither listed nor decided, and retention removes it.
func TestContactPolicies(t *testing.T) {
	in := openTestInbox(t)
	dm := func(id, sender string, at int64) *InboxRow {
		r := mailRow(id, "", "hi", at)
		r.SenderPubkey, r.SenderName = sender, sender+"-name"
		return r
	}
	if got := admit(t, in, dm("01A", "s1", 1)); got != "in" {
		t.Fatalf("open: %s", got)
	}
	setPolicy(t, in, messages.PolicyAuto, 0)
	if got := admit(t, in, dm("01B", "s2", 2)); got != "in" {
		t.Fatalf("auto: %s", got)
	}
	setPolicy(t, in, messages.PolicyContactsOnly, time.Hour)
	if got := admit(t, in, dm("01C", "s2", 3)); got != "in" {
		t.Fatalf("contacts_only, from the one auto let in: %s", got)
	}
	if got := admit(t, in, dm("01D", "s3", 1000)); got != "held" {
		t.Fatalf("contacts_only, a stranger: %s", got)
	}
	admit(t, in, dm("01E", "s3", 2000))
	admit(t, in, dm("01F", "s4", 10))
	setPolicy(t, in, messages.PolicyBlockAll, 0)
	if got := admit(t, in, dm("01G", "s2", 5)); got != "refused" {
		t.Fatalf("block_all, a contact: %s", got)
	}

	var reqs []messages.ContactRequest
	var c *messages.Contacts
	if err := run(t, in.DB, func(tx *Tx) (err error) {
		if reqs, err = in.Requests(tx, "m", "", 2000); err != nil {
			return err
		}
		c, err = in.Contacts(tx, "m")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 2 || reqs[0].Pubkey != "s4" || reqs[1].Pubkey != "s3" || len(reqs[1].Messages) != 2 {
		t.Fatalf("requests: %+v", reqs)
	}
	if c.Policy != messages.PolicyBlockAll || c.RequestTTL != "1h0m0s" || len(c.Contacts) != 1 || c.Contacts[0].Via != "auto" {
		t.Fatalf("contacts: %+v", c)
	}
	if rows, _, _ := list(t, in, InboxQuery{}); rowIDs(rows) != "01A,01B,01C" {
		t.Fatalf("the inbox holds %q", rowIDs(rows))
	}

	var accepted, refused, expired []InboxRow
	if err := run(t, in.DB, func(tx *Tx) (err error) {
		if accepted, err = in.Decide(tx, "m", "s3", true, 2000); err != nil {
			return err
		}
		if expired, err = in.Decide(tx, "m", "s4", true, 10+time.Hour.Milliseconds()); err != nil {
			return err
		}
		refused, err = in.Decide(tx, "m", "s4", false, 2000)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if rowIDs(accepted) != "01D,01E" || len(expired) != 0 || rowIDs(refused) != "01F" {
		t.Fatalf("accepted %q, expired %q, refused %q", rowIDs(accepted), rowIDs(expired), rowIDs(refused))
	}
	if rows, _, _ := list(t, in, InboxQuery{}); rowIDs(rows) != "01A,01B,01C,01D,01E" {
		t.Fatalf("after the decisions the inbox holds %q", rowIDs(rows))
	}
	setPolicy(t, in, messages.PolicyContactsOnly, 0)
	if got := admit(t, in, dm("01H", "s3", 3000)); got != "in" {
		t.Fatalf("from the accepted one: %s", got)
	}
	if got := admit(t, in, dm("01I", "s5", 3000)); got != "held" {
		t.Fatalf("a new stranger: %s", got)
	}
	// 01I's request runs out at 3000 + 1 h: listed then, not before, and
	// dropped only while still held and run out.
	until := 3000 + time.Hour.Milliseconds()
	var early, due []messages.ExpiredRequest
	var next, nextDue, dropped int64
	if err := run(t, in.DB, func(tx *Tx) (err error) {
		if early, next, err = in.ExpiredRequests(tx, "m", until-1, 10); err != nil {
			return err
		}
		if due, nextDue, err = in.ExpiredRequests(tx, "m", until, 10); err != nil {
			return err
		}
		dropped, err = in.DropExpiredRequests(tx, "m", []string{"01I", "01A", "01H"}, until)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(early) != 0 || next != until {
		t.Fatalf("before it ran out: %+v, next %d (want %d)", early, next, until)
	}
	want := messages.ExpiredRequest{ID: "01I", ClientMessageID: dm("01I", "s5", 3000).ClientMessageID, Sender: "s5"}
	if len(due) != 1 || due[0] != want || nextDue != 0 || dropped != 1 {
		t.Fatalf("run out: %+v (want %+v), next %d, dropped %d", due, want, nextDue, dropped)
	}
	if rows, _, _ := list(t, in, InboxQuery{}); rowIDs(rows) != "01A,01B,01C,01D,01E,01H" {
		t.Fatalf("after the drop the inbox holds %q", rowIDs(rows))
	}
	if got := admit(t, in, dm("01J", "s6", 4000)); got != "held" {
		t.Fatalf("another stranger: %s", got)
	}
	var pruned int64
	if err := run(t, in.DB, func(tx *Tx) (err error) {
		pruned, err = in.PruneRequests(tx, 4000+time.Hour.Milliseconds(), 10)
		return err
	}); err != nil || pruned != 1 {
		t.Fatalf("pruned %d, %v", pruned, err)
	}
}

// TestNoteContact: a route's contacts include whom it wrote to, once.
func TestNoteContact(t *testing.T) {
	in := openTestInbox(t)
	var c *messages.Contacts
	if err := run(t, in.DB, func(tx *Tx) (err error) {
		for _, via := range []string{"sent", "accepted"} {
			if err := in.AddContact(tx, "m", "p1", "bob", via, 1); err != nil {
				return err
			}
		}
		c, err = in.Contacts(tx, "m")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(c.Contacts) != 1 || c.Contacts[0].Via != "sent" || c.Policy != messages.PolicyOpen {
		t.Fatalf("contacts: %+v", c)
	}
	if !slices.Contains([]string{"168h0m0s"}, c.RequestTTL) {
		t.Errorf("the default request TTL is %s", c.RequestTTL)
	}
}

// TestInboxSearchIndexedInBulk: rows are indexed by the search that needs
// them, or once IndexEvery have arrived; deleting rows the index does not
// hold yet, and the last row (whose seq SQLite hands out again), leaves
// the caught-up index whole (FTS5's integrity-check, which holds only
// once no row waits) and every row findable.
func TestInboxSearchIndexedInBulk(t *testing.T) {
	in := openTestInbox(t)
	through := func() int64 {
		var n int64
		if err := run(t, in.DB, func(tx *Tx) error { return tx.Get(&n, `SELECT through FROM inbox_fts_state`) }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	check := func(when string) {
		t.Helper()
		if err := run(t, in.DB, func(tx *Tx) error {
			_, err := tx.Exec(`INSERT INTO inbox_fts (inbox_fts, rank) VALUES ('integrity-check', 1)`)
			return err
		}); err != nil {
			t.Fatalf("%s: the search index is not whole: %v", when, err)
		}
	}
	del := func(id string) {
		t.Helper()
		if err := run(t, in.DB, func(tx *Tx) error { _, err := in.DeleteRows(tx, InboxDeletion{ID: id}); return err }); err != nil {
			t.Fatal(err)
		}
	}
	insert(t, in, mailRow("01A", "", "alpha one", 1))
	insert(t, in, mailRow("01B", "", "alpha two", 2))
	if through() != 0 {
		t.Fatalf("rows indexed at insert: through %d", through())
	}
	del("01B")                                          // never indexed: nothing to take out of the index
	insert(t, in, mailRow("01C", "", "alpha three", 3)) // takes 01B's seq again
	if got := search(t, in, "alpha", "m"); got != "01C,01A" {
		t.Fatalf("search: %q", got)
	}
	check("after a search")
	del("01C") // the last row, indexed: the mark goes back to 01A
	insert(t, in, mailRow("01D", "", "alpha four", 4))
	if got := search(t, in, "alpha", "m"); got != "01D,01A" {
		t.Fatalf("search after the seq came back: %q", got)
	}
	check("at the end")
	for i := range IndexEvery {
		insert(t, in, mailRow(fmt.Sprintf("02%04d", i), "", "bulk", int64(10+i)))
	}
	if through() == 2 {
		t.Fatalf("%d rows inserted and none indexed without a search", IndexEvery)
	}
	check("after a bulk catch-up")
}

// TestInboxReopensWithRowsToIndex: rows the search index does not hold
// yet do not fail the integrity check of the next open (which would take
// inbox.db for corrupt and set it aside).
func TestInboxReopensWithRowsToIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.db")
	open := func() *Inbox {
		db, err := OpenInbox(context.Background(), path, slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		in, err := NewInbox(db)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	in := open()
	insert(t, in, mailRow("01A", "", "alpha one", 1))
	in.Close()
	in = open()
	defer in.Close()
	if got := search(t, in, "alpha", "m"); got != "01A" {
		t.Fatalf("after a reopen the row is %q: the file was set aside", got)
	}
}
