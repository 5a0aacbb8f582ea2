package integration

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// garbage is n deterministic non-SQLite bytes.
func garbage(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestCorruptOutboxGarbageExits8: an outbox.db that is not a database at
// all cannot be rebuilt; the daemon refuses to start with exit 8 and leaves
// the file alone.
func TestCorruptOutboxGarbageExits8(t *testing.T) {
	e := newEnv(t)
	junk := garbage(16 << 10)
	if err := os.WriteFile(e.file("outbox.db"), junk, 0o600); err != nil {
		t.Fatal(err)
	}
	d := spawnDaemon(t, e, "--no-tcp")
	d.waitExit(startDeadline)
	if code := d.exitCode(); code != 8 {
		t.Errorf("daemon up with a garbage outbox.db exited %d, want 8; stderr:\n%s", code, d.stderr)
	}
	assertOutboxKept(t, e, junk)
}

// TestCorruptOutboxIntegrityExits8: an outbox.db that opens but fails
// PRAGMA integrity_check (a damaged index page) stops the start with exit 8.
func TestCorruptOutboxIntegrityExits8(t *testing.T) {
	e := newEnv(t)
	d := startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	for _, id := range []string{"ic-1", "ic-2", "ic-3"} {
		mustSend(t, c, "*", "integrity "+id, id)
	}
	c.CloseIdleConnections()
	d.stop()

	db := openOutbox(t, e)
	var root, pageSize int
	if err := db.QueryRow("SELECT rootpage FROM sqlite_schema WHERE name = 'outbox_queue'").Scan(&root); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("PRAGMA page_size").Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	db.Close() // the last connection checkpoints the WAL into the file
	if e.exists("outbox.db-wal") {
		if fi, _ := os.Stat(e.file("outbox.db-wal")); fi.Size() > 0 {
			t.Fatalf("outbox.db-wal still holds %d bytes", fi.Size())
		}
	}
	f, err := os.OpenFile(e.file("outbox.db"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Keep the page's b-tree header byte (an index leaf) and scramble the rest.
	if _, err := f.WriteAt(garbage(pageSize-16), int64((root-1)*pageSize+16)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	damaged, err := os.ReadFile(e.file("outbox.db"))
	if err != nil {
		t.Fatal(err)
	}

	d = spawnDaemon(t, e, "--no-tcp")
	d.waitExit(startDeadline)
	if code := d.exitCode(); code != 8 {
		t.Fatalf("daemon up with a damaged outbox.db exited %d, want 8; stderr:\n%s", code, d.stderr)
	}
	if !strings.Contains(d.stderr.String(), "integrity check failed") {
		t.Errorf("stderr does not name the integrity check:\n%s", d.stderr)
	}
	assertOutboxKept(t, e, damaged)
}

// assertOutboxKept: a refused start leaves outbox.db as it was and no
// daemon files behind.
func assertOutboxKept(t *testing.T, e *env, want []byte) {
	t.Helper()
	got, err := os.ReadFile(e.file("outbox.db"))
	if err != nil {
		t.Fatalf("outbox.db after the refused start: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("outbox.db was modified by the refused start (%d bytes, was %d)", len(got), len(want))
	}
	for _, f := range []string{"daemon.sock", "daemon.pid", "http.port"} {
		if e.exists(f) {
			t.Errorf("%s left behind by a refused start", f)
		}
	}
}

// TestCorruptInboxIsQuarantined: a garbage inbox.db (a cache) is renamed to
// inbox.db.corrupt-<ms> and the daemon starts with a fresh one.
func TestCorruptInboxIsQuarantined(t *testing.T) {
	e := newEnv(t)
	junk := garbage(16 << 10)
	if err := os.WriteFile(e.file("inbox.db"), junk, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, e, "--no-tcp")
	matches, err := filepath.Glob(e.file("inbox.db.corrupt-*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(matches) != 1 {
		t.Fatalf("inbox.db.corrupt-* files: %v, want one", matches)
	}
	if q, err := os.ReadFile(matches[0]); err != nil || !bytes.Equal(q, junk) {
		t.Errorf("quarantined file %s does not hold the garbage (%v)", matches[0], err)
	}
	if fresh, err := os.ReadFile(e.file("inbox.db")); err != nil || !bytes.HasPrefix(fresh, []byte("SQLite format 3\x00")) {
		t.Errorf("inbox.db is not a fresh SQLite file (%v)", err)
	}
	if !strings.Contains(d.stderr.String(), `"msg":"inbox_corruption_recovered"`) {
		t.Errorf("no inbox_corruption_recovered log:\n%s", d.stderr)
	}
	c := unixClient(e.socket())
	mustSend(t, c, "*", "after inbox recovery", "inbox-ok")
	c.CloseIdleConnections()
	d.stop()
}
