package persistence

import (
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

const (
	bobKey = "b0b0000000000000000000000000000000000000000000000000000000000000"
	eveKey = "e0e0000000000000000000000000000000000000000000000000000000000000"
)

// mailAccept accepts a send of cid to target from mesh m at time at, with
// header h.
func mailAccept(t *testing.T, o *Outbox, cid, target string, at int64, h *messages.Mail) {
	t.Helper()
	if err := run(t, o.DB, func(tx *Tx) error {
		_, err := o.Accept(tx, &messages.AcceptSend{Mesh: "m", ClientMessageID: cid, RowID: "01J00000000000000000000" + cid,
			Fingerprint: messages.Fingerprint{1}, Payload: []byte(`{"type":"send","targetSpec":"` + target + `"}`), Now: at, Mail: h}, false)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func receipt(t *testing.T, o *Outbox, r *messages.RecordReceipt) *messages.ReceiptRecorded {
	t.Helper()
	var out *messages.ReceiptRecorded
	if err := run(t, o.DB, func(tx *Tx) (err error) {
		out, err = o.RecordReceipt(tx, r)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func outboxList(t *testing.T, o *Outbox, q *messages.ListOutbox) []messages.OutboxItem {
	t.Helper()
	q.Limit = 50
	var page *messages.OutboxPage
	if err := run(t, o.DB, func(tx *Tx) (err error) {
		page, err = o.List(tx, q)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return page.Items
}

func cids(items []messages.OutboxItem) string {
	out := ""
	for i, it := range items {
		if i > 0 {
			out += ","
		}
		out += it.ClientMessageID
	}
	return out
}

// TestOutboxReceipts: a receipt is recorded once, on a row of its mesh,
// and for a DM only from its recipient; a topic message takes any member's;
// acknowledgements and policy receipts show on the row; a receipt is an
// audit entry.
func TestOutboxReceipts(t *testing.T) {
	o := openTestOutbox(t)
	mailAccept(t, o, "A1", bobKey, 10, &messages.Mail{Subject: "build", ThreadID: "T", AckRequired: true})
	mailAccept(t, o, "A2", "#builds", 20, &messages.Mail{AckRequired: true})
	mailAccept(t, o, "A3", bobKey, 30, nil)
	ack := &messages.RecordReceipt{Mesh: "m", ClientMessageID: "A1", Kind: messages.ReceiptAck, Peer: bobKey, PeerName: "bob", At: 40}
	if r := receipt(t, o, ack); !r.Inserted || r.Subject != "build" || r.ThreadID != "T" {
		t.Fatalf("bob's ack: %+v", r)
	}
	if r := receipt(t, o, ack); r.Inserted {
		t.Fatal("the same ack was recorded twice")
	}
	for _, r := range []*messages.RecordReceipt{
		{Mesh: "m", ClientMessageID: "A1", Kind: messages.ReceiptAck, Peer: eveKey, PeerName: "eve", At: 41}, // not its recipient
		{Mesh: "other", ClientMessageID: "A1", Kind: messages.ReceiptAck, Peer: bobKey, At: 41},              // another sender's
		{Mesh: "m", ClientMessageID: "nope", Kind: messages.ReceiptAck, Peer: bobKey, At: 41},                // no such row
	} {
		if got := receipt(t, o, r); got.Inserted {
			t.Errorf("%+v was recorded", r)
		}
	}
	for _, peer := range []string{bobKey, eveKey} {
		receipt(t, o, &messages.RecordReceipt{Mesh: "m", ClientMessageID: "A2", Kind: messages.ReceiptAck, Peer: peer, At: 50})
	}
	receipt(t, o, &messages.RecordReceipt{Mesh: "m", ClientMessageID: "A3", Kind: messages.ReceiptHeld, Peer: bobKey,
		PeerName: "bob", At: 60, Until: 1000})
	items := outboxList(t, o, &messages.ListOutbox{})
	if cids(items) != "A3,A2,A1" {
		t.Fatalf("rows %s", cids(items))
	}
	a3, a2, a1 := items[0], items[1], items[2]
	if len(a1.AckedBy) != 1 || a1.AckedBy[0].Name != "bob" || a1.Subject != "build" || a1.ThreadID != "T" || !a1.AckRequired ||
		a1.Importance != "normal" {
		t.Errorf("A1: %+v", a1)
	}
	if len(a2.AckedBy) != 2 {
		t.Errorf("A2 acked by %+v, want bob and eve", a2.AckedBy)
	}
	if len(a3.Receipts) != 1 || a3.Receipts[0].Kind != messages.ReceiptHeld || a3.Receipts[0].Until == "" || a3.Subject != "" {
		t.Errorf("A3: %+v", a3)
	}
	if n := countAudit(t, o, "outbox.receipt"); n != 4 {
		t.Errorf("%d receipt audit entries, want 4", n)
	}
}

func countAudit(t *testing.T, o *Outbox, kind string) int {
	t.Helper()
	var n int
	if err := o.db.Get(&n, "SELECT COUNT(*) FROM audit WHERE kind = ?", kind); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOutboxMailViews: the rows of a thread (its root by its id); those
// waiting for an acknowledgement, older than a time; a requeue keeps the
// header.
func TestOutboxMailViews(t *testing.T) {
	o := openTestOutbox(t)
	mailAccept(t, o, "R", bobKey, 10, &messages.Mail{AckRequired: true})
	mailAccept(t, o, "B", bobKey, 20, &messages.Mail{ThreadID: "R", ReplyToID: "R", AckRequired: true})
	mailAccept(t, o, "C", bobKey, 30, &messages.Mail{ThreadID: "other"})
	mailAccept(t, o, "D", bobKey, 40, &messages.Mail{AckRequired: true})
	receipt(t, o, &messages.RecordReceipt{Mesh: "m", ClientMessageID: "R", Kind: messages.ReceiptAck, Peer: bobKey, At: 50})
	receipt(t, o, &messages.RecordReceipt{Mesh: "m", ClientMessageID: "D", Kind: messages.ReceiptHeld, Peer: bobKey, At: 50})
	for _, c := range []struct {
		q    messages.ListOutbox
		want string
	}{
		{messages.ListOutbox{Thread: "R"}, "R,B"}, // by row id, newest first
		{messages.ListOutbox{Thread: "other"}, "C"},
		{messages.ListOutbox{AwaitingAck: true}, "D,B"}, // a held receipt is no acknowledgement
		{messages.ListOutbox{AwaitingAck: true, EnqueuedBefore: 40}, "B"},
		{messages.ListOutbox{AwaitingAck: true, EnqueuedBefore: 20}, ""},
	} {
		if got := cids(outboxList(t, o, &c.q)); got != c.want {
			t.Errorf("%+v: %s, want %s", c.q, got, c.want)
		}
	}
	if err := run(t, o.DB, func(tx *Tx) error {
		_, err := o.Requeue(tx, &messages.RequeueOutbox{ID: "01J00000000000000000000B", NewRowID: "01J00000000000000000000E",
			NewClientMessageID: "E", Now: 60})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := cids(outboxList(t, o, &messages.ListOutbox{AwaitingAck: true})); got != "E,D" {
		t.Errorf("awaiting after a requeue of B: %s, want the successor E and D", got)
	}
	if got := cids(outboxList(t, o, &messages.ListOutbox{Thread: "R"})); got != "R,E,B" {
		t.Errorf("the thread after a requeue: %s", got)
	}
}
