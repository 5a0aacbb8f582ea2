package broker

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// TestAcceptIDPerSender: a client_message_id belongs to its sender. Two
// senders of one mesh using one id get two messages (in one batch or in
// two), each with its delivery row; each sender's retry is a duplicate of
// its own message, and its changed request a conflict with its own
// fingerprint.
func TestAcceptIDPerSender(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, carol, dave, bob := e.join(t, m, "alice"), e.join(t, m, "carol"), e.join(t, m, "dave"), e.join(t, m, "bob")
		res := e.accept(t, dm(m, alice, bob, "same", "from alice"), dm(m, carol, bob, "same", "from carol"))
		res = append(res, e.accept(t, dm(m, dave, bob, "same", "from dave"))...)
		ids := map[string]bool{}
		for n, r := range res {
			if r.Outcome != Created {
				t.Fatalf("send %d of id same: outcome %d (%v), want Created", n, r.Outcome, r.Err)
			}
			ids[r.BrokerMessageID] = true
		}
		if len(ids) != 3 {
			t.Fatalf("three senders' sends of one id made %d messages", len(ids))
		}
		if n := e.count(t, "delivery_queue WHERE recipient_pubkey = ?", bob.Pubkey); n != 3 {
			t.Errorf("bob has %d delivery rows, want 3", n)
		}
		for n, from := range []*Member{alice, carol, dave} {
			body := "from " + from.DisplayName
			if r := e.accept(t, dm(m, from, bob, "same", body))[0]; r.Outcome != Duplicate || r.BrokerMessageID != res[n].BrokerMessageID {
				t.Errorf("%s's retry: outcome %d, %s; want Duplicate of %s", from.DisplayName, r.Outcome, r.BrokerMessageID, res[n].BrokerMessageID)
			}
			if r := e.accept(t, dm(m, from, bob, "same", "changed"))[0]; r.Outcome != Conflict ||
				r.BrokerFingerprintPrefix != fingerprint(body).Prefix() {
				t.Errorf("%s's changed request: outcome %d, prefix %s; want Conflict with its own fingerprint", from.DisplayName, r.Outcome, r.BrokerFingerprintPrefix)
			}
			row, err := e.s.LookupDedupe(ctx, m.ID, from.Pubkey, "same")
			if err != nil || row == nil || row.BrokerMessageID != res[n].BrokerMessageID || row.SenderPubkey != from.Pubkey {
				t.Errorf("B0 read of %s's id: %+v, %v", from.DisplayName, row, err)
			}
		}
		if row, err := e.s.LookupDedupe(ctx, m.ID, bob.Pubkey, "same"); row != nil || err != nil {
			t.Errorf("B0 read of an id bob never sent: %+v, %v", row, err)
		}
		if n := e.count(t, "client_message_dedupe"); n != 3 {
			t.Errorf("%d dedupe rows, want 3", n)
		}
	})
}

// TestAckByClientIDPerSender: an ack naming only the client's id marks the
// pushed (leased) row with that id, not another sender's row with the same
// id that was never pushed: that one is still claimed.
func TestAckByClientIDPerSender(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, carol, bob := e.join(t, m, "alice"), e.join(t, m, "carol"), e.join(t, m, "bob")
		first := e.accept(t, dm(m, alice, bob, "x-1", "a"))[0]
		second := e.accept(t, dm(m, carol, bob, "x-1", "c"))[0]
		claim := Claim{MeshID: m.ID, RecipientPubkeys: []string{bob.Pubkey}, Lease: 30 * time.Second, Limit: 1}
		got, err := e.s.ClaimDeliveries(ctx, claim)
		if err != nil || len(got) != 1 || got[0].BrokerMessageID != first.BrokerMessageID {
			t.Fatalf("claim = %+v, %v; want alice's x-1", got, err)
		}
		ack := Ack{MeshID: m.ID, RecipientPubkeys: []string{bob.Pubkey}, ClientMessageID: "x-1"}
		if n, err := e.s.AckDeliveries(ctx, []Ack{ack}); n != 1 || err != nil {
			t.Fatalf("ack by client_message_id = %d, %v; want 1 (alice's, the pushed one)", n, err)
		}
		got, err = e.s.ClaimDeliveries(ctx, claim)
		if err != nil || len(got) != 1 || got[0].BrokerMessageID != second.BrokerMessageID || got[0].SenderPubkey != carol.Pubkey {
			t.Fatalf("claim after the ack = %+v, %v; want carol's x-1", got, err)
		}
	})
}

// migratedTo opens the database of opts with the migrations up to version
// applied (the schema an older broker left) and no Store.
func migratedTo(t *testing.T, opts Options, version int) (*sqlx.DB, *dialect) {
	t.Helper()
	ctx := context.Background()
	d, db, err := sqliteDialect, (*sqlx.DB)(nil), error(nil)
	if opts.Dir != "" {
		db, err = persistence.OpenSQLite(ctx, filepath.Join(opts.Dir, FileName), 0)
	} else {
		d = postgresDialect
		db, err = sqlx.Open("pgx", opts.DatabaseURL)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	all, err := persistence.LoadMigrations(d.migrations)
	if err != nil {
		t.Fatal(err)
	}
	all = slices.DeleteFunc(all, func(m persistence.Migration) bool { return m.Version > version })
	for {
		v, applied, err := migrateStep(ctx, db, d, all)
		if err != nil {
			t.Fatal(err)
		}
		if !applied {
			if v != version {
				t.Fatalf("migrated to %d, want %d", v, version)
			}
			return db, d
		}
	}
}

// TestDedupeMigrationPerSender: dedupe rows written by a broker at schema 4
// (keyed by mesh and id) are keyed by their message's sender after 0005 —
// a member key, or a session key — so that sender's retry is still a
// duplicate and its changed request a conflict, while another sender may
// now use the id. A row whose message was already pruned has an empty sender
// and still answers a retry of that old request, whoever sends it.
func TestDedupeMigrationPerSender(t *testing.T) {
	for _, backend := range []struct {
		name string
		opts func(t *testing.T) Options
	}{
		{"sqlite", func(t *testing.T) Options { return Options{Dir: t.TempDir()} }},
		{"postgres", func(t *testing.T) Options { return Options{DatabaseURL: brokertest.PostgresURL(t)} }},
	} {
		t.Run(backend.name, func(t *testing.T) {
			t.Parallel()
			testDedupeMigrationPerSender(t, backend.opts(t))
		})
	}
}

// oldRows is what a schema-4 broker wrote: a mesh of alice, carol and bob,
// and alice's session key.
type oldRows struct {
	mesh                      *Mesh
	alice, carol, bob         *Member
	session                   string
	aliceMsg, sessionMsg      string // broker ids of old-1 (alice's) and old-2 (the session's)
	aliceHistory, prunedMsgID string // old-1's history id; gone-1's broker id, its message pruned
}

func writeSchema4(t *testing.T, db *sqlx.DB, d *dialect, now time.Time) *oldRows {
	t.Helper()
	fp := fingerprint("hello")
	o := &oldRows{mesh: &Mesh{ID: ulid.Make().String(), Slug: "old"}, session: newPubkey(t),
		aliceMsg: ulid.Make().String(), sessionMsg: ulid.Make().String(),
		aliceHistory: ulid.Make().String(), prunedMsgID: ulid.Make().String()}
	exec := func(query string, args ...any) {
		t.Helper()
		if _, err := db.Exec(d.rewrite(query), args...); err != nil {
			t.Fatalf("%s: %v", strings.Fields(query)[2], err)
		}
	}
	exec("INSERT INTO mesh (id, slug, created_at, dedupe_mode) VALUES (?, ?, ?, 'permanent')", o.mesh.ID, o.mesh.Slug, d.time(now))
	for _, p := range []**Member{&o.alice, &o.carol, &o.bob} {
		*p = &Member{ID: ulid.Make().String(), Pubkey: newPubkey(t)}
	}
	o.alice.DisplayName, o.carol.DisplayName, o.bob.DisplayName = "alice", "carol", "bob"
	for _, mem := range []*Member{o.alice, o.carol, o.bob} {
		exec("INSERT INTO member (id, mesh_id, pubkey, display_name, created_at) VALUES (?, ?, ?, ?, ?)",
			mem.ID, o.mesh.ID, mem.Pubkey, mem.DisplayName, d.time(now))
	}
	for _, msg := range []struct{ id, cmid, sender, history string }{
		{o.aliceMsg, "old-1", o.alice.Pubkey, o.aliceHistory},
		{o.sessionMsg, "old-2", o.session, ulid.Make().String()},
	} {
		exec(`INSERT INTO message (id, mesh_id, client_message_id, request_fingerprint, sender_pubkey, target_spec,
			priority, nonce, ciphertext, created_at) VALUES (?, ?, ?, ?, ?, ?, 'next', 'bm9uY2U=', 'hello', ?)`,
			msg.id, o.mesh.ID, msg.cmid, fp[:], msg.sender, o.bob.Pubkey, d.time(now))
		exec("INSERT INTO message_history (history_id, mesh_id, message_id, created_at) VALUES (?, ?, ?, ?)",
			msg.history, o.mesh.ID, msg.id, d.time(now))
		exec(`INSERT INTO delivery_queue (mesh_id, message_id, recipient_pubkey, created_at, delivered_at)
			VALUES (?, ?, ?, ?, ?)`, o.mesh.ID, msg.id, o.bob.Pubkey, d.time(now), d.time(now))
	}
	for _, row := range []struct {
		cmid, brokerID string
		history        bool
	}{{"old-1", o.aliceMsg, true}, {"old-2", o.sessionMsg, true}, {"gone-1", o.prunedMsgID, false}} {
		exec(`INSERT INTO client_message_dedupe (mesh_id, client_message_id, broker_message_id, request_fingerprint,
			destination_kind, destination_ref, first_seen_at, expires_at, history_available)
			VALUES (?, ?, ?, ?, 'dm', ?, ?, NULL, ?)`,
			o.mesh.ID, row.cmid, row.brokerID, fp[:], o.bob.Pubkey, d.time(now), row.history)
	}
	return o
}

func testDedupeMigrationPerSender(t *testing.T, opts Options) {
	ctx := context.Background()
	db, d := migratedTo(t, opts, 4)
	o := writeSchema4(t, db, d, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	db.Close()

	e := openEnv(t, opts) // runs 0005
	if v := e.s.SchemaVersion(); v < 5 {
		t.Fatalf("schema version %d after open", v)
	}
	senders := map[string]string{}
	rows, err := e.s.db.Query("SELECT client_message_id, sender_pubkey FROM client_message_dedupe")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, sender string
		if err := rows.Scan(&id, &sender); err != nil {
			t.Fatal(err)
		}
		senders[id] = sender
	}
	rows.Close()
	if want := map[string]string{"old-1": o.alice.Pubkey, "old-2": o.session, "gone-1": ""}; !maps.Equal(senders, want) {
		t.Fatalf("senders after 0005: %v, want %v", senders, want)
	}
	if !e.s.unknownSenders {
		t.Error("the store did not notice the row of unknown sender")
	}

	// alice's old request: the same sender's retry is its duplicate (B0
	// and the accept), its changed request a conflict; carol may use the id.
	retry := dm(o.mesh, o.alice, o.bob, "old-1", "hello")
	if row, err := e.s.LookupDedupe(ctx, o.mesh.ID, o.alice.Pubkey, "old-1"); err != nil || row == nil ||
		row.BrokerMessageID != o.aliceMsg || row.HistoryID != o.aliceHistory {
		t.Errorf("B0 read of alice's old-1: %+v, %v", row, err)
	}
	if r := e.accept(t, retry)[0]; r.Outcome != Duplicate || r.BrokerMessageID != o.aliceMsg || !r.HistoryAvailable {
		t.Errorf("alice's retry of old-1: %+v, want Duplicate of %s", r, o.aliceMsg)
	}
	if r := e.accept(t, dm(o.mesh, o.alice, o.bob, "old-1", "changed"))[0]; r.Outcome != Conflict {
		t.Errorf("alice's changed old-1: %+v, want Conflict", r)
	}
	if r := e.accept(t, dm(o.mesh, o.carol, o.bob, "old-1", "hello"))[0]; r.Outcome != Created {
		t.Errorf("carol's old-1: %+v, want Created", r)
	}

	// The session's old request is the session's: its retry a duplicate,
	// the member's own old-2 a message of its own.
	fromSession := dm(o.mesh, o.alice, o.bob, "old-2", "hello")
	fromSession.SenderPubkey = o.session
	if r := e.accept(t, fromSession)[0]; r.Outcome != Duplicate || r.BrokerMessageID != o.sessionMsg {
		t.Errorf("the session's retry of old-2: %+v, want Duplicate of %s", r, o.sessionMsg)
	}
	if r := e.accept(t, dm(o.mesh, o.alice, o.bob, "old-2", "hello"))[0]; r.Outcome != Created {
		t.Errorf("alice's own old-2: %+v, want Created", r)
	}

	// gone-1's message was pruned before the upgrade: nobody knows its
	// sender, so its row answers everyone, in B0 and in the accept (both
	// requests of one batch), and no second message is made.
	if row, err := e.s.LookupDedupe(ctx, o.mesh.ID, o.carol.Pubkey, "gone-1"); err != nil || row == nil ||
		row.BrokerMessageID != o.prunedMsgID || row.SenderPubkey != "" || row.HistoryAvailable {
		t.Errorf("B0 read of gone-1 by carol: %+v, %v", row, err)
	}
	res := e.accept(t, dm(o.mesh, o.alice, o.bob, "gone-1", "hello"), dm(o.mesh, o.carol, o.bob, "gone-1", "changed"))
	if r := res[0]; r.Outcome != Duplicate || r.BrokerMessageID != o.prunedMsgID || r.HistoryAvailable {
		t.Errorf("a retry of gone-1: %+v, want Duplicate of %s with history_available false", r, o.prunedMsgID)
	}
	if r := res[1]; r.Outcome != Conflict || r.BrokerFingerprintPrefix != fingerprint("hello").Prefix() {
		t.Errorf("another request with gone-1: %+v, want Conflict", r)
	}
	if n := e.count(t, "client_message_dedupe WHERE client_message_id = 'gone-1'"); n != 1 {
		t.Errorf("gone-1 has %d dedupe rows, want 1", n)
	}
	if got, err := e.s.OrphanCheck(ctx); err != nil || got != (Orphans{}) {
		t.Errorf("orphan check after the migration: %+v, %v", got, err)
	}
	checkDedupeSchema(t, e)
}

// checkDedupeSchema: the table has both indexes; on SQLite it is still
// STRICT and WITHOUT ROWID.
func checkDedupeSchema(t *testing.T, e *env) {
	t.Helper()
	var indexes []string
	query := "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'client_message_dedupe' AND sql IS NOT NULL"
	if e.s.Backend() == postgresName {
		query = `SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()
			AND tablename = 'client_message_dedupe' AND indexname <> 'client_message_dedupe_pkey'`
	}
	if err := e.s.db.Select(&indexes, query); err != nil {
		t.Fatal(err)
	}
	slices.Sort(indexes)
	if want := []string{"client_message_dedupe_expires_idx", "client_message_dedupe_unknown_sender_idx"}; !slices.Equal(indexes, want) {
		t.Errorf("indexes %v, want %v", indexes, want)
	}
	if e.s.Backend() == sqliteName {
		var ddl string
		if err := e.s.db.Get(&ddl, "SELECT sql FROM sqlite_master WHERE name = 'client_message_dedupe'"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(ddl, "STRICT") || !strings.Contains(ddl, "WITHOUT ROWID") ||
			!strings.Contains(ddl, "PRIMARY KEY (mesh_id, sender_pubkey, client_message_id)") {
			t.Errorf("client_message_dedupe after 0005: %s", ddl)
		}
	}
}
