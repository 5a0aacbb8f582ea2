package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// TestNamesUniquePerMesh: a display name that reads the same as an active
// member's (case, width, invisible characters, look-alike letters) is
// refused at join without using the invite; another mesh, or a revoked
// holder, leaves it free.
func TestNamesUniquePerMesh(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		e.join(t, m, "alice")
		inv := e.invite(t, m.Slug, 1)
		for _, name := range []string{"alice", "аlice" /* Cyrillic а */, "ALICE", "Ａｌｉｃｅ", "a1ice", "ali\u200bce", " alice "} {
			_, err := e.s.RedeemInvite(ctx, inv.Token, newPubkey(t), name)
			var taken *NameTakenError
			if !errors.Is(err, ErrNameTaken) || !errors.Is(err, ErrInvalid) || !errors.As(err, &taken) || taken.Holder != "alice" {
				t.Errorf("join as %q: %v, want the name taken by alice", name, err)
			}
		}
		if _, err := e.s.RedeemInvite(ctx, inv.Token, newPubkey(t), "\u200b\u200d"); !errors.Is(err, ErrInvalid) {
			t.Errorf("a name of invisible characters: %v", err)
		}
		// Nothing above used the invite's one use.
		joined, err := e.s.RedeemInvite(ctx, inv.Token, newPubkey(t), "bob")
		if err != nil {
			t.Fatalf("bob: %v", err)
		}
		bob := joined.Member
		other := e.mesh(t, Mesh{})
		e.join(t, other, "аlice") // names are unique per mesh
		if err := e.s.RevokeMember(ctx, m.ID, bob.Pubkey); err != nil {
			t.Fatal(err)
		}
		e.join(t, m, "BOB") // a revoked member's name is free again
		if holder, err := e.s.NameHolder(ctx, m.ID, "аlice", ""); err != nil || holder != "alice" {
			t.Errorf("NameHolder(аlice) = %q, %v", holder, err)
		}
		if holder, err := e.s.NameHolder(ctx, m.ID, "carol", ""); err != nil || holder != "" {
			t.Errorf("NameHolder(carol) = %q, %v", holder, err)
		}
	})
}

// TestNameKeyIndex: two members of a mesh cannot hold one name key, even
// written past the store's check (a join racing another).
func TestNameKeyIndex(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		m := e.mesh(t, Mesh{})
		e.join(t, m, "alice")
		_, err := e.s.db.Exec(e.s.d.rewrite(`INSERT INTO member (id, mesh_id, pubkey, display_name, created_at, name_key)
			VALUES (?, ?, ?, ?, ?, ?)`), ulid.Make().String(), m.ID, newPubkey(t), "аlice", e.s.d.time(e.clock.Now()), "alice")
		if !isNameKeyConflict(err) {
			t.Fatalf("a second holder of one name key: %v", err)
		}
	})
}

// TestNameMigrationKeepsLookalikes: a database from before migration 0004
// with alice and аlice both members migrates without losing either; the
// older holds the name, the look-alike stays a member without it, new
// look-alikes are refused, and the name passes to the look-alike once the
// holder is revoked.
func TestNameMigrationKeepsLookalikes(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		undo := []string{"DROP INDEX member_name_key_idx", "ALTER TABLE member DROP COLUMN name_key",
			"DROP TABLE hello_seen", "DROP TABLE broker_setting", "DROP TABLE mesh_owner_key", "ALTER TABLE member DROP COLUMN role",
			"DROP TABLE topic_member", "DROP TABLE topic", "DROP INDEX message_topic_idx", "DROP TABLE state", "DROP TABLE memory",
			"DROP TABLE skill", "DROP TABLE mesh_lock", "DROP TABLE node", "DROP TABLE reservation", "DROP TABLE reservation_scope",
			"DROP TABLE mesh_session", "CREATE INDEX delivery_queue_message_idx ON delivery_queue(message_id)", // 0017 drops it
			"CREATE INDEX message_created_idx ON message(created_at)", // 0019 too
			"ALTER TABLE message DROP COLUMN sender_name",             // 0020
			"DELETE FROM schema_migrations WHERE version >= 4"}
		if e.s.Backend() == postgresName { // 0005 too (SQLite's rebuilds the table, and runs again as it is)
			undo = append(undo, "ALTER TABLE client_message_dedupe DROP COLUMN sender_pubkey",
				"ALTER TABLE client_message_dedupe ADD PRIMARY KEY (mesh_id, client_message_id)",
				"DROP INDEX delivery_queue_waiting_idx") // 0013 (SQLite's is a comment)
		} else {
			undo = append(undo, "DROP TABLE memory_fts") // 0009's index; its triggers went with memory
		}
		for _, stmt := range undo {
			if _, err := e.s.db.Exec(stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		alice, lookalike := newPubkey(t), newPubkey(t)
		for i, r := range []struct{ pubkey, name string }{{alice, "alice"}, {lookalike, "аlice"}} {
			if _, err := e.s.db.Exec(e.s.d.rewrite(`INSERT INTO member (id, mesh_id, pubkey, display_name, created_at)
				VALUES (?, ?, ?, ?, ?)`), ulid.Make().String(), m.ID, r.pubkey, r.name, e.s.d.time(e.clock.Now().Add(time.Duration(i)*time.Second))); err != nil {
				t.Fatal(err)
			}
		}
		again := openEnv(t, e.opts)
		if again.s.SchemaVersion() < 4 {
			t.Fatalf("schema version %d", again.s.SchemaVersion())
		}
		keys := map[string]*string{}
		rows, err := again.s.db.Query(again.s.d.rewrite("SELECT pubkey, name_key FROM member WHERE mesh_id = ?"), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var pk string
			var key *string
			if err := rows.Scan(&pk, &key); err != nil {
				t.Fatal(err)
			}
			keys[pk] = key
		}
		rows.Close()
		if len(keys) != 2 || keys[alice] == nil || *keys[alice] != "alice" || keys[lookalike] != nil {
			t.Fatalf("name keys after the migration: alice %v, look-alike %v (%d members)", keys[alice], keys[lookalike], len(keys))
		}
		if n := again.logs.count("member_name_lookalikes_kept"); n != 1 {
			t.Errorf("member_name_lookalikes_kept logged %d times", n)
		}
		inv := again.invite(t, m.Slug, 1)
		if _, err := again.s.RedeemInvite(ctx, inv.Token, newPubkey(t), "ALICE"); !errors.Is(err, ErrNameTaken) {
			t.Errorf("a third look-alike after the migration: %v", err)
		}
		if err := again.s.RevokeMember(ctx, m.ID, alice); err != nil {
			t.Fatal(err)
		}
		third := openEnv(t, e.opts)
		var key *string
		if err := third.s.db.Get(&key, third.s.d.rewrite("SELECT name_key FROM member WHERE pubkey = ?"), lookalike); err != nil || key == nil || *key != "alice" {
			t.Errorf("the look-alike's key once alice is revoked: %v, %v", key, err)
		}
	})
}

// TestRecordHello: a hello's signature is accepted once; the same one again
// (in any case of hex) is a replay until it expires and is pruned.
func TestRecordHello(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		pub, sig := newPubkey(t), strings.Repeat("ab", 64)
		expires := e.clock.Now().Add(2 * time.Minute)
		if err := e.s.RecordHello(ctx, pub, sig, expires); err != nil {
			t.Fatal(err)
		}
		for _, again := range []string{sig, strings.ToUpper(sig)} {
			if err := e.s.RecordHello(ctx, pub, again, expires); !errors.Is(err, ErrHelloReplayed) {
				t.Errorf("the same signature again: %v, want ErrHelloReplayed", err)
			}
		}
		if err := e.s.RecordHello(ctx, pub, strings.Repeat("cd", 64), expires); err != nil {
			t.Errorf("another signature of the key: %v", err)
		}
		e.clock.Advance(2*time.Minute + time.Millisecond)
		if err := e.s.RecordHello(ctx, pub, strings.Repeat("ef", 64), e.clock.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if n := e.count(t, "hello_seen"); n != 1 {
			t.Errorf("%d hellos remembered after the first two expired, want 1", n)
		}
	})
}

// TestSettings: a setting reads back as last recorded, with its time.
func TestSettings(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		if _, _, err := e.s.Setting(ctx, SettingPublicURL); !errors.Is(err, ErrSettingUnset) {
			t.Fatalf("unset: %v", err)
		}
		for _, u := range []string{"http://a:1", "https://b.example"} {
			if err := e.s.SetSetting(ctx, SettingPublicURL, u); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(time.Second)
		}
		got, at, err := e.s.Setting(ctx, SettingPublicURL)
		if err != nil || got != "https://b.example" || !at.Equal(e.clock.Now().Add(-time.Second)) {
			t.Errorf("Setting = %q, %v, %v", got, at, err)
		}
	})
}
