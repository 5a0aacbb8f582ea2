package persistence

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestAuditObjectsFromMigrations: the migrations' audit triggers and view
// are read out whole, each with its last definition.
func TestAuditObjectsFromMigrations(t *testing.T) {
	var names []string
	for _, o := range auditObjects() {
		names = append(names, o.kind+" "+o.name)
		if o.kind == "trigger" && !strings.HasSuffix(o.sql, "END") {
			t.Errorf("%s: %q does not end its body", o.name, o.sql)
		}
	}
	want := []string{"view audit_append", "trigger audit_append_entry", "trigger audit_outbox_insert", "trigger audit_outbox_status",
		"trigger audit_outbox_pruned", "trigger audit_outbox_delete", "trigger audit_outbox_receipt"}
	if !slices.Equal(names, want) {
		t.Errorf("audit objects = %q, want %q", names, want)
	}
}

// TestAuditTriggersRestored: a trigger dropped, one changed and one added
// behind the daemon's back (the sqlite3 shell) are put back or removed at
// the next open, which records the repair in the chain, and the open after
// that finds nothing to repair.
func TestAuditTriggersRestored(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outbox.db")
	o, err := OpenOutbox(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Restored) != 0 {
		t.Fatalf("a new outbox.db restored %q", o.Restored)
	}
	for _, stmt := range []string{
		`DROP TRIGGER audit_outbox_status`,
		`DROP TRIGGER audit_outbox_delete`,
		`CREATE TRIGGER audit_outbox_delete AFTER DELETE ON outbox BEGIN SELECT 1; END`,
		`CREATE TRIGGER sneaky AFTER INSERT ON audit BEGIN DELETE FROM audit WHERE seq = NEW.seq; END`,
	} {
		if _, err := o.db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(stmt, err)
		}
	}
	o.Close()

	o, err = OpenOutbox(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	slices.Sort(o.Restored)
	if want := []string{"audit_outbox_delete", "audit_outbox_status", "sneaky"}; !slices.Equal(o.Restored, want) {
		t.Errorf("restored %q, want %q", o.Restored, want)
	}
	entries := auditLog(t, o)
	if len(entries) != 1 || entries[0].Kind != "audit.restored" || !strings.Contains(entries[0].Detail, "sneaky") {
		t.Fatalf("the log after the repair = %+v", entries)
	}
	if _, err := messages.VerifyAudit(nil, entries); err != nil {
		t.Error(err)
	}
	o.Close()
	if o, err = OpenOutbox(ctx, path); err != nil || len(o.Restored) != 0 {
		t.Fatalf("a third open restored %q, %v", o.Restored, err)
	}
}
