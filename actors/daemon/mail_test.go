package daemon_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
	"github.com/claudemesh/claudemesh-go/transport/ipcserver"
)

// mailCounts is what the mail routes may store: outbox rows, receipts,
// inbox rows (held ones too), acknowledgements, policies and contacts.
func mailCounts(t *testing.T, outbox, inbox *sqlx.DB) string {
	t.Helper()
	var out []string
	for _, q := range []struct {
		db  *sqlx.DB
		sql string
	}{{outbox, "SELECT COUNT(*) FROM outbox"}, {outbox, "SELECT COUNT(*) FROM outbox_receipt"},
		{inbox, "SELECT COUNT(*) FROM inbox"}, {inbox, "SELECT COUNT(*) FROM inbox WHERE acked_at IS NOT NULL"},
		{inbox, "SELECT COUNT(*) FROM contact"}, {inbox, "SELECT coalesce(group_concat(mesh || ':' || policy), '') FROM contact_policy"}} {
		var v string
		if err := q.db.Get(&v, "SELECT CAST(("+q.sql+") AS TEXT)"); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return strings.Join(out, " ")
}

// TestMailBadInput: every mail route refuses bad input with a 4xx and its
// own code, and stores nothing: no outbox row (no receipt, no notice), no
// acknowledgement, no policy, no contact.
func TestMailBadInput(t *testing.T) {
	paths := tempPaths(t)
	d := startEmbedded(t, paths)
	defer d.Close()
	c := ipc.NewClient(paths.Socket())
	tokA, regA := register(t, c, "sess-a", "alpha", os.Getpid())
	tokB, regB := register(t, c, "sess-b", "beta", os.Getpid())
	a, b := c.AsSession(tokA), c.AsSession(tokB)
	waitLinked(t, a, b)
	ctx := context.Background()
	// b holds a's message as a contact request; a has a message of b's.
	if _, err := b.SetContactPolicy(ctx, &messages.ContactPolicyRequest{Policy: messages.PolicyContactsOnly}); err != nil {
		t.Fatal(err)
	}
	msg := "hi"
	if _, err := a.Send(ctx, &messages.SendRequest{To: regB.SessionPubkey, Message: &msg, ClientMessageID: "a1"}, ""); err != nil {
		t.Fatal(err)
	}
	var heldID, aRow string
	wait.For(t, settleWithin, "a's message held", func() bool { // before b writes to a, which makes a b's contact
		reqs, err := b.ContactRequests(ctx, "")
		if err != nil || len(reqs.Requests) != 1 {
			return false
		}
		heldID = reqs.Requests[0].Messages[0].ID
		return true
	})
	if _, err := b.Send(ctx, &messages.SendRequest{To: regA.SessionPubkey, Message: &msg, ClientMessageID: "b1"}, ""); err != nil {
		t.Fatal(err)
	}
	wait.For(t, settleWithin, "b's message", func() bool {
		page, err := a.Inbox(ctx, url.Values{"mark_seen": {"false"}})
		if err != nil || len(page.Items) != 1 {
			return false
		}
		aRow = page.Items[0].ID
		return true
	})
	outbox := sqlx.MustOpen("sqlite", "file:"+paths.OutboxDB()+"?mode=ro&_pragma=busy_timeout(5000)")
	defer outbox.Close()
	inbox := sqlx.MustOpen("sqlite", "file:"+paths.InboxDB()+"?mode=ro&_pragma=busy_timeout(5000)")
	defer inbox.Close()
	wait.For(t, settleWithin, "the held notice", func() bool { // a was told; nothing more moves after this
		row, err := a.OutboxRow(ctx, "", "a1")
		return err == nil && row != nil && len(row.Receipts) == 1
	})
	before := mailCounts(t, outbox, inbox)

	to := `"to":"` + regB.SessionPubkey + `","message":"x"`
	for _, c := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "/v1/send", `{` + to + `,"subject":"a\nb"}`, 400, messages.CodeInvalidSubject},
		{"POST", "/v1/send", `{` + to + `,"thread_id":"a b"}`, 400, messages.CodeInvalidThread},
		{"POST", "/v1/send", `{` + to + `,"importance":"loud"}`, 400, messages.CodeInvalidImportance},
		{"POST", "/v1/send", `{` + to + `,"ack_required":1}`, 400, messages.CodeInvalidJSON},
		{"POST", "/v1/send", `{` + to + `,"meta":{"claudemesh_mail":{}}}`, 400, messages.CodeInvalidMeta},
		{"POST", "/v1/inbox/nope/ack", ``, 404, messages.CodeInboxRowNotFound},
		{"POST", "/v1/inbox/" + aRow + "/ack", ``, 404, messages.CodeInboxRowNotFound}, // another session's row
		{"POST", "/v1/inbox/x/y/ack", ``, 404, "not_found"},
		{"GET", "/v1/inbox/x/ack", ``, 405, "method_not_allowed"},
		{"GET", "/v1/inbox/search", ``, 400, messages.CodeInvalidQuery},
		{"GET", "/v1/inbox/search?q=%21%21", ``, 400, messages.CodeInvalidQuery},
		{"GET", "/v1/inbox/search?q=x&limit=0", ``, 400, messages.CodeInvalidQuery},
		{"GET", "/v1/inbox/search?q=" + strings.Repeat("x", 1025), ``, 400, messages.CodeInvalidQuery},
		{"GET", "/v1/inbox?importance=loud", ``, 400, messages.CodeInvalidQuery},
		{"GET", "/v1/inbox?thread=a%20b", ``, 400, messages.CodeInvalidQuery},
		{"GET", "/v1/inbox?unacked=maybe", ``, 400, messages.CodeInvalidQuery},
		{"GET", "/v1/outbox?awaiting_ack=maybe", ``, 400, messages.CodeInvalidQuery},
		{"GET", "/v1/outbox?awaiting_ack=true&older_than=-1s", ``, 400, messages.CodeInvalidQuery},
		{"GET", "/v1/outbox?older_than=1h", ``, 400, messages.CodeInvalidQuery},
		{"GET", "/v1/outbox?thread=a%20b", ``, 400, messages.CodeInvalidQuery},
		{"POST", "/v1/contacts/policy", `{}`, 400, messages.CodeInvalidPolicy},
		{"POST", "/v1/contacts/policy", `{"policy":"closed"}`, 400, messages.CodeInvalidPolicy},
		{"POST", "/v1/contacts/policy", `{"policy":"open","request_ttl":"1s"}`, 400, messages.CodeInvalidTTL},
		{"POST", "/v1/contacts/policy", `{"policy":"open","request_ttl":"soon"}`, 400, messages.CodeInvalidTTL},
		{"POST", "/v1/contacts/policy", `{"policy":"open","polcy":"x"}`, 400, messages.CodeUnknownField},
		{"POST", "/v1/contacts/accept", `{}`, 400, messages.CodeMissingPeer},
		{"POST", "/v1/contacts/accept", `{"peer":"nobody"}`, 404, messages.CodeNoContactRequest},
		{"POST", "/v1/contacts/refuse", `{"peer":"ab"}`, 404, messages.CodeNoContactRequest},
		{"POST", "/v1/contacts/refuse", `[]`, 400, messages.CodeInvalidJSON},
	} {
		req, err := http.NewRequest(c.method, "http://localhost"+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(ipcserver.SessionTokenHeader, tokB)
		status, out := (&harness{t: t, hc: unixClient(paths.Socket(), 4)}).do(req)
		if status != c.status || out["error"] != c.code {
			t.Errorf("%s %s %s: %d %v, want %d %s", c.method, c.path, c.body, status, out, c.status, c.code)
		}
	}
	if _, err := b.AckMessage(ctx, heldID); !isCode(err, messages.CodeMessageHeld) {
		t.Errorf("ack of a held message: %v", err)
	}
	if after := mailCounts(t, outbox, inbox); after != before {
		t.Fatalf("bad requests changed what is stored:\n%s\nwant\n%s", after, before)
	}
}
