package broker

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestAcceptDedupeContract walks one client_message_id through the answers
// of spec §4.9.2.
func TestAcceptDedupeContract(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		steps := []struct {
			name       string
			body       string
			want       Outcome
			wantStatus int
		}{
			{"first accept", "hello", Created, http.StatusCreated},
			{"retry, same fingerprint", "hello", Duplicate, http.StatusOK},
			{"same id, other fingerprint", "hello!", Conflict, http.StatusConflict},
			{"retry after the conflict", "hello", Duplicate, http.StatusOK},
		}
		var first AcceptResult
		for _, step := range steps {
			e.clock.Advance(time.Second)
			res := e.accept(t, dm(m, alice, bob, "cm-1", step.body))[0]
			if res.Outcome != step.want || res.Status() != step.wantStatus {
				t.Fatalf("%s: outcome %d status %d (%v), want %d %d", step.name, res.Outcome, res.Status(), res.Err, step.want, step.wantStatus)
			}
			switch res.Outcome {
			case Created:
				first = res
				if res.BrokerMessageID == "" || res.HistoryID == "" || !res.HistoryAvailable || res.FirstSeenAt.IsZero() {
					t.Errorf("%s: incomplete result %+v", step.name, res)
				}
			case Duplicate:
				if res.BrokerMessageID != first.BrokerMessageID || res.HistoryID != first.HistoryID ||
					!res.HistoryAvailable || !res.FirstSeenAt.Equal(first.FirstSeenAt) {
					t.Errorf("%s: %+v, want the original %+v", step.name, res, first)
				}
			case Conflict:
				if want := fingerprint("hello").Prefix(); res.BrokerFingerprintPrefix != want {
					t.Errorf("%s: prefix %q, want %q", step.name, res.BrokerFingerprintPrefix, want)
				}
				if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(res.BrokerFingerprintPrefix) || res.BrokerMessageID != "" {
					t.Errorf("%s: %+v", step.name, res)
				}
			}
		}
		for table, want := range map[string]int{"client_message_dedupe": 1, "message": 1, "message_history": 1, "delivery_queue": 1} {
			if n := e.count(t, table); n != want {
				t.Errorf("%d rows in %s, want %d", n, table, want)
			}
		}
		if n := e.retriedPerRequest(); n != 0 {
			t.Errorf("%d batches fell back to per-request savepoints", n)
		}
	})
}

// TestLookupDedupe: the B0 read returns the stored row, and its Answer is
// what the accept path would say.
func TestLookupDedupe(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		first := e.accept(t, dm(m, alice, bob, "cm-1", "hello"))[0]
		row, err := e.s.LookupDedupe(ctx, m.ID, alice.Pubkey, "cm-1")
		if err != nil || row == nil {
			t.Fatalf("LookupDedupe = %v, %v", row, err)
		}
		if row.BrokerMessageID != first.BrokerMessageID || row.HistoryID != first.HistoryID ||
			row.RequestFingerprint != fingerprint("hello") || row.DestinationKind != KindDM || row.DestinationRef != bob.Pubkey {
			t.Errorf("dedupe row %+v does not match %+v", row, first)
		}
		wantExpiry := first.FirstSeenAt.AddDate(0, 0, DefaultDedupeRetentionDays)
		if row.ExpiresAt == nil || !row.ExpiresAt.Equal(wantExpiry) {
			t.Errorf("expires_at %v, want %v", row.ExpiresAt, wantExpiry)
		}
		if b0 := row.Answer(fingerprint("hello")); b0.Outcome != Duplicate || b0.BrokerMessageID != first.BrokerMessageID {
			t.Errorf("B0 answer %+v", b0)
		}
		if b0 := row.Answer(fingerprint("other")); b0.Outcome != Conflict || b0.BrokerFingerprintPrefix != fingerprint("hello").Prefix() {
			t.Errorf("B0 answer to another fingerprint %+v", b0)
		}
		if row, err := e.s.LookupDedupe(ctx, m.ID, alice.Pubkey, "never-sent"); row != nil || err != nil {
			t.Errorf("LookupDedupe(unknown) = %+v, %v; want nil, nil", row, err)
		}
	})
}

// TestAcceptSameBatch: requests sharing an id in one batch behave like
// sequential requests, and results keep the request order.
func TestAcceptSameBatch(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		stranger := &Member{Pubkey: newPubkey(t)}
		cases := []struct {
			name string
			reqs []*AcceptRequest
			want []Outcome
		}{
			{"same fingerprint", []*AcceptRequest{dm(m, alice, bob, "a", "x"), dm(m, alice, bob, "a", "x")},
				[]Outcome{Created, Duplicate}},
			{"other fingerprint", []*AcceptRequest{dm(m, alice, bob, "b", "x"), dm(m, alice, bob, "b", "y")},
				[]Outcome{Created, Conflict}},
			{"rejected, then valid", []*AcceptRequest{dm(m, alice, stranger, "c", "x"), dm(m, alice, bob, "c", "x")},
				[]Outcome{Rejected, Created}},
			{"order kept", []*AcceptRequest{dm(m, alice, bob, "z", "1"), dm(m, alice, stranger, "d", "2"),
				dm(m, alice, bob, "z", "3"), dm(m, alice, bob, "e", "4")},
				[]Outcome{Created, Rejected, Conflict, Created}},
		}
		for _, c := range cases {
			res := e.accept(t, c.reqs...)
			for i := range res {
				if res[i].Outcome != c.want[i] {
					t.Errorf("%s: request %d: outcome %d (%v), want %d", c.name, i, res[i].Outcome, res[i].Err, c.want[i])
				}
			}
			if c.want[1] == Duplicate && res[1].BrokerMessageID != res[0].BrokerMessageID {
				t.Errorf("%s: duplicate names %s, want %s", c.name, res[1].BrokerMessageID, res[0].BrokerMessageID)
			}
		}
		if n := e.count(t, "message"); n != 5 {
			t.Errorf("%d message rows, want 5 (a, b, c, z, e)", n)
		}
	})
}

// TestAcceptConcurrentSameID: 100 concurrent batches (separate connections
// on PostgreSQL) with one id store exactly one message.
func TestAcceptConcurrentSameID(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		const n = 100
		results := make([]AcceptResult, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				results[i] = e.s.AcceptBatch(context.Background(), []*AcceptRequest{dm(m, alice, bob, "race", "x")})[0]
			})
		}
		wg.Wait()
		created := 0
		for i, r := range results {
			switch r.Outcome {
			case Created:
				created++
			case Duplicate:
			default:
				t.Fatalf("request %d: outcome %d (%v)", i, r.Outcome, r.Err)
			}
		}
		if created != 1 {
			t.Fatalf("%d Created, want 1", created)
		}
		for _, r := range results {
			if r.BrokerMessageID != results[0].BrokerMessageID {
				t.Fatalf("broker_message_id %s and %s for one client_message_id", r.BrokerMessageID, results[0].BrokerMessageID)
			}
		}
		for _, table := range []string{"client_message_dedupe", "message", "message_history", "delivery_queue"} {
			if got := e.count(t, table); got != 1 {
				t.Errorf("%d rows in %s, want 1", got, table)
			}
		}
	})
}

// TestAcceptB2Rejection: a DM whose destination does not exist is a 4xx
// that leaves no dedupe row, so the id stays free.
func TestAcceptB2Rejection(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob, carol := e.join(t, m, "alice"), e.join(t, m, "bob"), e.join(t, m, "carol")
		if err := e.s.RevokeMember(ctx, m.ID, carol.Pubkey); err != nil {
			t.Fatal(err)
		}
		other := e.mesh(t, Mesh{})
		outsider := e.join(t, other, "outsider")
		noRecipients := dm(m, alice, bob, "r4", "x")
		noRecipients.Recipients = nil
		cases := []struct {
			name string
			req  *AcceptRequest
		}{
			{"not a member", dm(m, alice, &Member{Pubkey: newPubkey(t)}, "r1", "x")},
			{"revoked member", dm(m, alice, carol, "r2", "x")},
			{"member of another mesh", dm(m, alice, outsider, "r3", "x")},
			{"no recipients", noRecipients},
		}
		for _, c := range cases {
			res := e.accept(t, c.req)[0]
			var me *messages.Error
			if res.Outcome != Rejected || !errors.As(res.Err, &me) || me.Code != CodeUnknownRecipient || res.Status() != http.StatusNotFound {
				t.Fatalf("%s: outcome %d status %d err %v, want Rejected 404 unknown_recipient", c.name, res.Outcome, res.Status(), res.Err)
			}
			if row, err := e.s.LookupDedupe(ctx, m.ID, c.req.SenderPubkey, c.req.ClientMessageID); row != nil || err != nil {
				t.Errorf("%s: dedupe row %+v left behind (%v)", c.name, row, err)
			}
			retry := dm(m, alice, bob, c.req.ClientMessageID, "x")
			if res := e.accept(t, retry)[0]; res.Outcome != Created {
				t.Errorf("%s: the id is not free: %d (%v)", c.name, res.Outcome, res.Err)
			}
		}
		if n := e.count(t, "message WHERE mesh_id = ?", m.ID); n != len(cases) {
			t.Errorf("%d messages, want %d (the retries)", n, len(cases))
		}
		if n := e.retriedPerRequest(); n != 0 {
			t.Errorf("%d batches fell back to per-request savepoints", n)
		}
	})
}

// TestAcceptDMToSession: a DM to a session key passes B2 when the key is
// mapped to an active member (SessionMembers), and its delivery row is the
// session key's; unmapped, or mapped to a revoked member, it is 404.
func TestAcceptDMToSession(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		m := e.mesh(t, Mesh{})
		alice, bob, carol := e.join(t, m, "alice"), e.join(t, m, "bob"), e.join(t, m, "carol")
		if err := e.s.RevokeMember(context.Background(), m.ID, carol.Pubkey); err != nil {
			t.Fatal(err)
		}
		toSession := func(id string, session *Member, members map[string]string) *AcceptRequest {
			r := dm(m, alice, session, id, "x")
			r.SessionMembers = members
			return r
		}
		bobSession, carolSession := &Member{Pubkey: newPubkey(t)}, &Member{Pubkey: newPubkey(t)}
		cases := []struct {
			name string
			req  *AcceptRequest
			want Outcome
		}{
			{"session of an active member", toSession("s1", bobSession, map[string]string{bobSession.Pubkey: bob.Pubkey}), Created},
			{"unmapped session key", toSession("s2", bobSession, nil), Rejected},
			{"session of a revoked member", toSession("s3", carolSession, map[string]string{carolSession.Pubkey: carol.Pubkey}), Rejected},
		}
		for _, c := range cases {
			if res := e.accept(t, c.req)[0]; res.Outcome != c.want {
				t.Errorf("%s: outcome %d (%v), want %d", c.name, res.Outcome, res.Err, c.want)
			}
		}
		if n := e.count(t, "delivery_queue WHERE recipient_pubkey = ?", bobSession.Pubkey); n != 1 {
			t.Errorf("%d delivery rows for the session key, want 1", n)
		}
		if n := e.count(t, "delivery_queue WHERE recipient_pubkey = ?", bob.Pubkey); n != 0 {
			t.Errorf("%d delivery rows for the member key, want 0", n)
		}
	})
}

// TestAcceptFailureMidTransaction: a request that fails after its dedupe,
// message and history inserts (its delivery insert violates a constraint)
// leaves nothing, keeps its id free and does not disturb its neighbours.
func TestAcceptFailureMidTransaction(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob, carol := e.join(t, m, "alice"), e.join(t, m, "bob"), e.join(t, m, "carol")
		topic := func(id string, recipients ...string) *AcceptRequest {
			return &AcceptRequest{MeshID: m.ID, ClientMessageID: id, RequestFingerprint: fingerprint(id),
				DestinationKind: KindTopic, DestinationRef: "*", SenderPubkey: alice.Pubkey, TargetSpec: "*",
				Priority: "low", Nonce: "n", Ciphertext: "c", Recipients: recipients}
		}
		cases := []struct {
			name string
			bad  *AcceptRequest
		}{
			{"duplicate-recipient", topic("dup", bob.Pubkey, carol.Pubkey, bob.Pubkey)},
			{"malformed-recipient", topic("malformed", bob.Pubkey, "NOT-A-KEY")},
		}
		for _, c := range cases {
			res := e.accept(t, topic(c.name+"-before", bob.Pubkey), c.bad, topic(c.name+"-after", carol.Pubkey))
			if res[0].Outcome != Created || res[2].Outcome != Created {
				t.Fatalf("%s: neighbours %d (%v), %d (%v); want Created", c.name, res[0].Outcome, res[0].Err, res[2].Outcome, res[2].Err)
			}
			if res[1].Outcome != Failed || res[1].Err == nil || res[1].Status() != http.StatusInternalServerError {
				t.Fatalf("%s: outcome %d (%v), want Failed", c.name, res[1].Outcome, res[1].Err)
			}
			if row, err := e.s.LookupDedupe(ctx, m.ID, c.bad.SenderPubkey, c.bad.ClientMessageID); row != nil || err != nil {
				t.Errorf("%s: dedupe row %+v left behind (%v)", c.name, row, err)
			}
			if n := e.count(t, "message WHERE client_message_id = ?", c.bad.ClientMessageID); n != 0 {
				t.Errorf("%s: %d message rows left behind", c.name, n)
			}
			if res := e.accept(t, topic(c.bad.ClientMessageID, bob.Pubkey, carol.Pubkey))[0]; res.Outcome != Created {
				t.Errorf("%s: the id is not free: %d (%v)", c.name, res.Outcome, res.Err)
			}
		}
		if n := e.retriedPerRequest(); n != len(cases) {
			t.Errorf("%d batches retried per request, want %d", n, len(cases))
		}
		if n := e.count(t, "message_history"); n != 3*len(cases) {
			t.Errorf("%d history rows, want %d", n, 3*len(cases))
		}
		if o, err := e.s.OrphanCheck(ctx); err != nil || o != (Orphans{}) {
			t.Errorf("OrphanCheck = %+v, %v", o, err)
		}
	})
}

// commitGuard makes COMMIT fail for any transaction that inserted a message
// with client_message_id 'boom': a deferred foreign key to an empty table.
var commitGuard = map[string][]string{
	sqliteName: {
		`CREATE TABLE commit_guard_parent (id TEXT PRIMARY KEY)`,
		`CREATE TABLE commit_guard (ref TEXT REFERENCES commit_guard_parent(id) DEFERRABLE INITIALLY DEFERRED)`,
		`CREATE TRIGGER commit_guard_boom AFTER INSERT ON message WHEN NEW.client_message_id = 'boom'
		 BEGIN INSERT INTO commit_guard VALUES ('missing'); END`,
	},
	postgresName: {
		`CREATE TABLE commit_guard_parent (id TEXT PRIMARY KEY)`,
		`CREATE TABLE commit_guard (ref TEXT REFERENCES commit_guard_parent(id) DEFERRABLE INITIALLY DEFERRED)`,
		`CREATE FUNCTION commit_guard_boom() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN IF NEW.client_message_id = 'boom' THEN INSERT INTO commit_guard VALUES ('missing'); END IF; RETURN NEW; END $$`,
		`CREATE TRIGGER commit_guard_boom AFTER INSERT ON message FOR EACH ROW EXECUTE FUNCTION commit_guard_boom()`,
	},
}

// TestAcceptCommitFailure: when COMMIT fails, every result of the batch is
// Failed, nothing is stored, and the store keeps working.
func TestAcceptCommitFailure(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		for _, stmt := range commitGuard[e.s.Backend()] {
			if _, err := e.s.db.Exec(stmt); err != nil {
				t.Fatal(err)
			}
		}
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		res := e.accept(t, dm(m, alice, bob, "ok-1", "x"), dm(m, alice, bob, "boom", "x"), dm(m, alice, bob, "ok-2", "x"))
		for i, r := range res {
			if r.Outcome != Failed || r.Err == nil {
				t.Errorf("request %d: outcome %d (%v), want Failed", i, r.Outcome, r.Err)
			}
		}
		for _, table := range []string{"client_message_dedupe", "message", "message_history", "delivery_queue"} {
			if n := e.count(t, table); n != 0 {
				t.Errorf("%d rows in %s after a failed commit", n, table)
			}
		}
		res = e.accept(t, dm(m, alice, bob, "ok-1", "x"), dm(m, alice, bob, "ok-2", "x"))
		for i, r := range res {
			if r.Outcome != Created {
				t.Errorf("after the failed commit, request %d: outcome %d (%v)", i, r.Outcome, r.Err)
			}
		}
	})
}

// TestAcceptValidation: malformed requests are rejected before the claim.
func TestAcceptValidation(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		cases := []struct {
			name   string
			mutate func(r *AcceptRequest)
			code   string
		}{
			{"empty id", func(r *AcceptRequest) { r.ClientMessageID = "" }, messages.CodeInvalidClientID},
			{"id with space", func(r *AcceptRequest) { r.ClientMessageID = "a b" }, messages.CodeInvalidClientID},
			{"kind", func(r *AcceptRequest) { r.DestinationKind = "broadcast" }, CodeInvalidDestination},
			{"priority", func(r *AcceptRequest) { r.Priority = "urgent" }, messages.CodeInvalidPriority},
			{"sender", func(r *AcceptRequest) { r.SenderPubkey = "abc" }, CodeInvalidSender},
			{"meta", func(r *AcceptRequest) { r.Meta = []byte("{nope") }, messages.CodeInvalidMeta},
		}
		for _, c := range cases {
			req := dm(m, alice, bob, "v-"+c.name, "x")
			c.mutate(req)
			res := e.accept(t, req)[0]
			var me *messages.Error
			if res.Outcome != Rejected || !errors.As(res.Err, &me) || me.Code != c.code || res.Status() != http.StatusBadRequest {
				t.Errorf("%s: outcome %d err %v, want Rejected 400 %s", c.name, res.Outcome, res.Err, c.code)
			}
		}
		unknown := dm(m, alice, bob, "v-mesh", "x")
		unknown.MeshID = "01NOSUCHMESH"
		res := e.accept(t, unknown)[0]
		var me *messages.Error
		if res.Outcome != Rejected || !errors.As(res.Err, &me) || me.Code != CodeUnknownMesh || res.Status() != http.StatusNotFound {
			t.Errorf("unknown mesh: outcome %d err %v, want Rejected 404 %s", res.Outcome, res.Err, CodeUnknownMesh)
		}
		if n := e.count(t, "client_message_dedupe"); n != 0 {
			t.Errorf("%d dedupe rows after rejections", n)
		}
		if n := e.retriedPerRequest(); n != 0 {
			t.Errorf("%d batches fell back to per-request savepoints", n)
		}
	})
}

// TestAcceptRetention: expires_at follows the mesh's dedupe mode.
func TestAcceptRetention(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cases := []struct {
			name string
			mesh Mesh
			want func(first time.Time) *time.Time
		}{
			{"default", Mesh{}, func(f time.Time) *time.Time { x := f.AddDate(0, 0, 365); return &x }},
			{"three days", Mesh{DedupeRetentionDays: 3}, func(f time.Time) *time.Time { x := f.AddDate(0, 0, 3); return &x }},
			{"permanent", Mesh{DedupeMode: DedupePermanent}, func(time.Time) *time.Time { return nil }},
		}
		for _, c := range cases {
			m := e.mesh(t, c.mesh)
			alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
			res := e.accept(t, dm(m, alice, bob, "ret", "x"))[0]
			row, err := e.s.LookupDedupe(ctx, m.ID, alice.Pubkey, "ret")
			if err != nil || row == nil {
				t.Fatalf("%s: %v %v", c.name, row, err)
			}
			want := c.want(res.FirstSeenAt)
			if (want == nil) != (row.ExpiresAt == nil) || want != nil && !want.Equal(*row.ExpiresAt) {
				t.Errorf("%s: expires_at %v, want %v", c.name, row.ExpiresAt, want)
			}
		}
	})
}
