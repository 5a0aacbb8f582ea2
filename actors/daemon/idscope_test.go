package daemon_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/actors/daemon"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// startSenders starts a daemon serving one offline membership per slug
// (rows stay pending; the test moves them), after prepare has seen the
// empty directories.
func startSenders(t *testing.T, prepare func(config.Paths), slugs ...string) *harness {
	t.Helper()
	paths := tempPaths(t)
	for _, slug := range slugs {
		m, err := config.NewMembership(slug, "ws://127.0.0.1:1/ws")
		if err == nil {
			_, err = paths.AddMembership(m)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	prepare(paths)
	cfg := config.DefaultFile()
	cfg.IPC.TCPEnabled = false
	d, err := daemon.Start(daemon.Options{Paths: paths, Config: cfg, Version: "test",
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	h := &harness{t: t, d: d, paths: paths, hc: unixClient(paths.Socket(), 8)}
	h.db = sqlx.MustOpen("sqlite", "file:"+paths.OutboxDB()+"?_pragma=busy_timeout(5000)")
	t.Cleanup(func() { h.db.Close() })
	return h
}

// TestSendIDPerSender is issue 16's defect 1 through the socket: two
// identities on one daemon use one client_message_id. The second is its
// own message (202, a row of its own), not the first's duplicate; each
// sender's retries and conflicts are answered from its own row alone; the
// fingerprint covers the sender; GET /v1/outbox?client_message_id= lists
// one row per sender, or the one of ?mesh=.
func TestSendIDPerSender(t *testing.T) {
	h := startSenders(t, func(config.Paths) {}, "local", "reviewer")
	body := func(mesh, msg string) string {
		return fmt.Sprintf(`{"to":"@builds","message":%q,"mesh":%q,"client_message_id":"xm-1"}`, msg, mesh)
	}
	if st, resp := h.post("/v1/send", body("local", "m")); st != 202 {
		t.Fatalf("local: %d %v", st, resp)
	}
	// local's message has gone out: the broker took it as bm-local.
	h.exec(`UPDATE outbox SET status = 'done', broker_message_id = 'bm-local', history_id = 'h-local'
	        WHERE mesh = 'local' AND client_message_id = 'xm-1'`)
	st, resp := h.post("/v1/send", body("reviewer", "m"))
	if st != 202 || resp["status"] != "queued" || resp["broker_message_id"] != nil {
		t.Fatalf("reviewer's send with local's id: %d %v, want 202 queued (its own message)", st, resp)
	}
	if h.rows("client_message_id = 'xm-1'") != 2 || h.rows("client_message_id = 'xm-1' AND mesh = 'reviewer' AND status = 'pending'") != 1 {
		t.Fatal("reviewer's message has no pending row of its own")
	}

	// Retries: each sender's answered from its own row.
	if st, resp := h.post("/v1/send", body("local", "m")); st != 200 || resp["duplicate"] != true || resp["broker_message_id"] != "bm-local" {
		t.Errorf("local's retry: %d %v, want 200 duplicate bm-local", st, resp)
	}
	if st, resp := h.post("/v1/send", body("reviewer", "m")); st != 202 || resp["status"] != "queued" {
		t.Errorf("reviewer's retry: %d %v, want 202 queued", st, resp)
	}
	// Conflicts: per sender, and the fingerprint differs by sender.
	st, local := h.post("/v1/send", body("local", "other"))
	if st != 409 || local["conflict"] != "outbox_done_fingerprint_mismatch" || local["broker_message_id"] != "bm-local" {
		t.Errorf("local, other body: %d %v", st, local)
	}
	st, reviewer := h.post("/v1/send", body("reviewer", "other"))
	if st != 409 || reviewer["conflict"] != "outbox_pending_fingerprint_mismatch" || reviewer["broker_message_id"] != nil {
		t.Errorf("reviewer, other body: %d %v", st, reviewer)
	}
	if local["daemon_fingerprint_prefix"] == reviewer["daemon_fingerprint_prefix"] {
		t.Errorf("one request from two senders has one fingerprint (%v): it must cover the mesh", local["daemon_fingerprint_prefix"])
	}
	if n := h.rows("1=1"); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}

	// The look-up by id: every sender's row, or the one of ?mesh=.
	items := func(q string) []any {
		t.Helper()
		st, page := h.get("/v1/outbox?" + q)
		if st != 200 {
			t.Fatalf("GET /v1/outbox?%s: %d %v", q, st, page)
		}
		it, _ := page["items"].([]any)
		return it
	}
	if got := items("client_message_id=xm-1"); len(got) != 2 {
		t.Errorf("by id alone: %v, want both senders' rows", got)
	}
	got := items("client_message_id=xm-1&mesh=reviewer")
	if len(got) != 1 || got[0].(map[string]any)["mesh"] != "reviewer" || got[0].(map[string]any)["status"] != "pending" {
		t.Errorf("by id and mesh: %v", got)
	}
	if got := items("mesh=local"); len(got) != 1 {
		t.Errorf("by mesh: %v", got)
	}
	if st, resp := h.get("/v1/outbox?client_message_id=xm-1&mesh=No!"); st != 400 || resp["error"] != "invalid_query" {
		t.Errorf("a malformed mesh: %d %v", st, resp)
	}
	// The CLI's look-up (claudemesh send --wait) names the mesh it sent on.
	row, err := ipc.NewClient(h.paths.Socket()).OutboxRow(context.Background(), "reviewer", "xm-1")
	if err != nil || row == nil || row.Mesh != "reviewer" || row.Status != messages.StatusPending {
		t.Errorf("OutboxRow(reviewer, xm-1): %+v %v", row, err)
	}

	// A requeue's new id needs to be free for its own sender only.
	if st, _ := h.post("/v1/send", `{"to":"@builds","message":"n","mesh":"local","client_message_id":"xm-2"}`); st != 202 {
		t.Fatal(st)
	}
	var rowID string
	if err := h.db.Get(&rowID, "SELECT id FROM outbox WHERE mesh = 'reviewer' AND client_message_id = 'xm-1'"); err != nil {
		t.Fatal(err)
	}
	h.exec(`UPDATE outbox SET status = 'dead', last_error = 'x' WHERE id = ?`, rowID)
	if st, resp := h.post("/v1/outbox/requeue", `{"id":"`+rowID+`","new_client_message_id":"xm-2"}`); st != 200 {
		t.Fatalf("requeue of reviewer's row to local's xm-2: %d %v", st, resp)
	}
	if h.rows("client_message_id = 'xm-2' AND mesh = 'reviewer' AND status = 'pending'") != 1 ||
		h.rows("client_message_id = 'xm-2' AND mesh = 'local' AND status = 'pending'") != 1 {
		t.Fatal("the requeue's successor is missing or touched local's row")
	}
}

// TestSendAfterOutboxUpgrade: rows written before outbox migration 0006
// hold the §4.3 fingerprint, which does not cover the sender. After the
// upgrade a retry of one is still the same request (pending: 202, done:
// 200 duplicate), another body still a conflict, and the id is its
// sender's (another mesh may use it).
func TestSendAfterOutboxUpgrade(t *testing.T) {
	const sent = `{"to":"@builds","message":"m","mesh":"local","client_message_id":%q}`
	h := startSenders(t, func(paths config.Paths) {
		all, err := persistence.LoadMigrations(persistence.OutboxMigrations)
		if err != nil {
			t.Fatal(err)
		}
		upTo5 := fstest.MapFS{}
		for _, m := range all {
			if m.Version <= 5 {
				upTo5[fmt.Sprintf("%04d_%s.sql", m.Version, m.Name)] = &fstest.MapFile{Data: []byte(m.SQL)}
			}
		}
		if err := os.MkdirAll(filepath.Dir(paths.OutboxDB()), 0o700); err != nil {
			t.Fatal(err)
		}
		old, err := persistence.Open(context.Background(), paths.OutboxDB(), upTo5)
		if err != nil {
			t.Fatal(err)
		}
		defer old.Close()
		db := sqlx.MustOpen("sqlite", "file:"+paths.OutboxDB()+"?_pragma=busy_timeout(5000)")
		defer db.Close()
		for id, status := range map[string]string{"old-pending": "pending", "old-done": "done"} {
			send, err := messages.DecodeSend([]byte(fmt.Sprintf(sent, id)), "", false)
			if err != nil {
				t.Fatal(err)
			}
			fp := send.Fingerprint() // §4.3, as the old binary stored it
			db.MustExec(`INSERT INTO outbox (id, client_message_id, mesh, request_fingerprint, payload, enqueued_at,
			             next_attempt_at, status, broker_message_id) VALUES (?, ?, 'local', ?, '{}', 1, 1, ?, 'bm-old')`,
				"row-"+id, id, fp[:], status)
		}
	}, "local", "reviewer")
	if st, resp := h.post("/v1/send", fmt.Sprintf(sent, "old-pending")); st != 202 || resp["status"] != "queued" {
		t.Errorf("retry of an old pending row: %d %v, want 202 queued", st, resp)
	}
	if st, resp := h.post("/v1/send", fmt.Sprintf(sent, "old-done")); st != 200 || resp["broker_message_id"] != "bm-old" {
		t.Errorf("retry of an old done row: %d %v, want 200 duplicate bm-old", st, resp)
	}
	other := `{"to":"@builds","message":"other","mesh":"local","client_message_id":"old-pending"}`
	if st, resp := h.post("/v1/send", other); st != 409 || resp["conflict"] != "outbox_pending_fingerprint_mismatch" {
		t.Errorf("an old pending row, other body: %d %v", st, resp)
	}
	reviewer := `{"to":"@builds","message":"m","mesh":"reviewer","client_message_id":"old-done"}`
	if st, resp := h.post("/v1/send", reviewer); st != http.StatusAccepted {
		t.Errorf("another sender's use of an old id: %d %v", st, resp)
	}
	if n := h.rows("1=1"); n != 3 {
		t.Fatalf("%d rows, want the 2 old ones and reviewer's", n)
	}
}

// TestSessionsShareAnID: two agent sessions of one mesh use one
// client_message_id. Each send is a message of its own (stored under the
// session's route); each session's look-up by id sees its own row; and
// neither row is ever taken for the other's: the first is delivered, and
// the second is delivered too or, where the broker's dedupe is keyed by
// mesh and id alone, refused (dead, with the broker's reason) — never
// marked done with the first's broker id.
func TestSessionsShareAnID(t *testing.T) {
	paths := tempPaths(t)
	d := startEmbedded(t, paths)
	defer d.Close()
	c := ipc.NewClient(paths.Socket())
	ctx := context.Background()
	tokA, _ := register(t, c, "sess-a", "alpha", os.Getpid())
	tokB, _ := register(t, c, "sess-b", "beta", os.Getpid())
	ca, cb := c.AsSession(tokA), c.AsSession(tokB)
	waitListed(t, ca, "alpha", "beta")
	for name, cl := range map[string]*ipc.Client{"alpha": ca, "beta": cb} {
		res, err := cl.Send(ctx, &messages.SendRequest{To: "@builds", Message: ptr("m"), ClientMessageID: "xm-1"}, "")
		if err != nil || res.Accepted == nil {
			t.Fatalf("%s's send: %+v %v, want 202", name, res, err)
		}
	}
	final := func(cl *ipc.Client) *messages.OutboxItem {
		row, err := cl.OutboxRow(ctx, "local", "xm-1")
		if err != nil || row == nil {
			t.Fatalf("the session's row: %+v %v", row, err)
		}
		return row
	}
	var a, b *messages.OutboxItem
	wait.For(t, settleWithin, "both rows to be done or dead", func() bool {
		a, b = final(ca), final(cb)
		done := func(r *messages.OutboxItem) bool {
			return r.Status == messages.StatusDone || r.Status == messages.StatusDead
		}
		return done(a) && done(b)
	})
	if a.Mesh != "local/sess-a" || b.Mesh != "local/sess-b" {
		t.Fatalf("rows of %s and %s, want each session's route", a.Mesh, b.Mesh)
	}
	if a.Status == messages.StatusDone && b.Status == messages.StatusDone && *a.BrokerMessageID == *b.BrokerMessageID {
		t.Fatalf("both sessions' messages recorded as broker message %s: one was swallowed as the other's duplicate", *a.BrokerMessageID)
	}
	h := &harness{t: t, hc: unixClient(paths.Socket(), 1)}
	if st, page := h.get("/v1/outbox?client_message_id=xm-1"); st != 200 || len(page["items"].([]any)) != 2 {
		t.Fatalf("the operator's look-up by id: %d %v, want both sessions' rows", st, page)
	}
	t.Logf("alpha's row %s (%s), beta's %s (%s)", a.Status, messages.Deref(a.LastError), b.Status, messages.Deref(b.LastError))
}
