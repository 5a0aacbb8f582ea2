package integration

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestAuditVerifyCLI: the audit log of a real daemon verifies through
// `claudemesh daemon audit verify`; once one entry of outbox.db's log is
// tampered with, verify names that entry and exits 8.
func TestAuditVerifyCLI(t *testing.T) {
	e := newEnv(t)
	d := startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	for _, id := range []string{"au-1", "au-2", "au-3"} {
		mustSend(t, c, "*", "audited "+id, id)
	}
	c.CloseIdleConnections()

	res := runCLI(t, e, "daemon", "audit", "verify")
	if res.code != 0 || !regexp.MustCompile(`(?m)^audit chain ok: \d+ entries \(seq 1\.\.\d+\)$`).MatchString(res.stdout) {
		t.Fatalf("verify of an untouched log: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	res = runCLI(t, e, "daemon", "audit", "list", "--limit", "2", "--json")
	var page messages.AuditPage
	if err := json.Unmarshal([]byte(res.stdout), &page); res.code != 0 || err != nil {
		t.Fatalf("audit list --json: exit %d, %v\n%s%s", res.code, err, res.stdout, res.stderr)
	}
	if len(page.Entries) != 2 || page.NextAfter != 2 || page.Entries[0].Kind != "outbox.accepted" || page.Entries[0].Subject != "au-1" {
		t.Fatalf("audit list --json: %+v", page)
	}
	res = runCLI(t, e, "daemon", "audit", "list", "--after", "1", "--limit", "1")
	if res.code != 0 || !strings.Contains(res.stdout, "outbox.accepted  au-2") ||
		!strings.Contains(res.stdout, "more entries: claudemesh daemon audit list --after 2") {
		t.Fatalf("audit list: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := runCLI(t, e, "daemon", "audit", "list", "--limit", "0"); res.code != 2 || !strings.Contains(res.stderr, "--limit must be from 1 to 1000") {
		t.Fatalf("audit list --limit 0: exit %d\n%s", res.code, res.stderr)
	}
	d.stop()

	execSQL(t, e, `UPDATE audit SET detail = replace(detail, 'pending', 'done') WHERE seq = 2`)
	startDaemon(t, e, "--no-tcp")
	res = runCLI(t, e, "daemon", "audit", "verify")
	if res.code != 8 || !strings.Contains(res.stderr, "audit chain broken at seq 2: hash mismatch") ||
		!strings.Contains(res.stderr, "keep a copy of outbox.db") {
		t.Fatalf("verify of a tampered log: exit %d, want 8\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
}

// TestAuditTriggersDropped: a status changed by hand after the audit
// trigger was dropped (the sqlite3 shell) is caught: the daemon puts the
// trigger back at its start and records the repair, and `audit verify`,
// whose chain still links, exits 8 naming the row whose status it does
// not record; the transitions after the repair are audited again.
func TestAuditTriggersDropped(t *testing.T) {
	e := newEnv(t)
	d := startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	mustSend(t, c, "*", "audited", "au-1")
	c.CloseIdleConnections()
	d.stop()

	execSQL(t, e, `DROP TRIGGER audit_outbox_status`)
	execSQL(t, e, `UPDATE outbox SET status = 'aborted' WHERE client_message_id = 'au-1'`)
	startDaemon(t, e, "--no-tcp")
	res := runCLI(t, e, "daemon", "audit", "verify")
	if res.code != 8 || !strings.Contains(res.stderr, "(au-1): aborted, its last entry says") {
		t.Fatalf("verify after a status changed unaudited: exit %d, want 8\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	res = runCLI(t, e, "daemon", "audit", "list", "--json")
	var page messages.AuditPage
	if err := json.Unmarshal([]byte(res.stdout), &page); res.code != 0 || err != nil {
		t.Fatalf("audit list --json: exit %d, %v\n%s%s", res.code, err, res.stdout, res.stderr)
	}
	if n := len(page.Entries); n == 0 || page.Entries[n-1].Kind != "audit.restored" || !strings.Contains(page.Entries[n-1].Detail, "audit_outbox_status") {
		t.Fatalf("the log after the restart: %+v, want audit.restored last", page.Entries)
	}
}
