package integration

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

var ulidRe = regexp.MustCompile(`^[0-7][0-9A-HJKMNP-TV-Z]{25}$`)

// requeueResult is the --json output of outbox requeue.
type requeueResult = messages.RequeueResult

// sendFrame is the stored payload.
type sendFrame = messages.SendFrame

// TestOperatorRecoveryCLI drives outbox list and outbox requeue through the
// CLI against a real daemon, with rows put in dead and done states by SQL.
func TestOperatorRecoveryCLI(t *testing.T) {
	e := newEnv(t)
	if res := runCLI(t, e, "daemon", "outbox", "list"); res.code == 0 || !strings.Contains(res.stderr, "daemon not running") {
		t.Errorf("outbox list without a daemon: exit %d, stderr:\n%s", res.code, res.stderr)
	}

	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	peer := hex.EncodeToString(pub)
	bodies := map[string][]byte{
		"op-dead":    sendBody(t, peer, "a DM that will die", "op-dead"),
		"op-pending": sendBody(t, "@general", "still pending", "op-pending"),
		"op-done":    sendBody(t, "@team", "already delivered", "op-done"),
	}
	d := startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	for _, id := range []string{"op-dead", "op-pending", "op-done"} {
		if r := post(t, c, bodies[id]); r.status != http.StatusAccepted {
			t.Fatalf("send %s: %d %s", id, r.status, r.body)
		}
	}
	c.CloseIdleConnections()
	d.stop()
	execSQL(t, e,
		`UPDATE outbox SET status = 'dead', attempts = 3, last_error = 'payload too large' WHERE client_message_id = 'op-dead'`,
		`UPDATE outbox SET status = 'done', attempts = 1, delivered_at = 1700000000000, broker_message_id = 'brk-1'
		  WHERE client_message_id = 'op-done'`)

	d = startDaemon(t, e, "--no-tcp")
	c = unixClient(e.socket())
	defer c.CloseIdleConnections()
	before := byClientID(listAll(t, c, ""))
	deadRow, pendingRow, doneRow := before["op-dead"], before["op-pending"], before["op-done"]

	// outbox list --failed shows exactly the dead row.
	res := runCLI(t, e, "daemon", "outbox", "list", "--failed", "--json")
	if res.code != 0 {
		t.Fatalf("outbox list --failed: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	var failed outboxPage
	if err := json.Unmarshal([]byte(res.stdout), &failed); err != nil {
		t.Fatalf("outbox list --failed --json printed %q: %v", res.stdout, err)
	}
	if len(failed.Items) != 1 || failed.Items[0].ID != deadRow.ID || failed.Items[0].Status != "dead" ||
		failed.Items[0].LastError == nil || *failed.Items[0].LastError != "payload too large" || failed.Items[0].To != peer {
		t.Fatalf("outbox list --failed: %s", res.stdout)
	}
	if res := runCLI(t, e, "daemon", "outbox", "list", "--done", "--json"); res.code != 0 || !strings.Contains(res.stdout, doneRow.ID) ||
		strings.Contains(res.stdout, deadRow.ID) {
		t.Errorf("outbox list --done: exit %d, stdout:\n%s", res.code, res.stdout)
	}

	// A new id that already has a row is refused and changes nothing.
	all := listAll(t, c, "")
	res = runCLI(t, e, "daemon", "outbox", "requeue", deadRow.ID, "--new-client-id", "op-pending", "--json")
	if res.code == 0 || !strings.Contains(res.stderr, "client_message_id_in_use") {
		t.Errorf("requeue --new-client-id op-pending: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	if now := listAll(t, c, ""); !reflect.DeepEqual(now, all) {
		t.Errorf("a refused requeue changed rows:\nbefore %+v\nafter  %+v", all, now)
	}

	// Requeue the dead row with a minted id.
	res = runCLI(t, e, "daemon", "outbox", "requeue", deadRow.ID, "--json")
	if res.code != 0 {
		t.Fatalf("requeue %s: exit %d, stderr:\n%s", deadRow.ID, res.code, res.stderr)
	}
	var rq requeueResult
	if err := json.Unmarshal([]byte(res.stdout), &rq); err != nil {
		t.Fatalf("requeue --json printed %q: %v", res.stdout, err)
	}
	if rq.AbortedRowID != deadRow.ID || !ulidRe.MatchString(rq.NewRowID) || !ulidRe.MatchString(rq.NewClientMessageID) ||
		rq.NewClientMessageID == "op-dead" {
		t.Fatalf("requeue result %+v", rq)
	}
	if res := runCLI(t, e, "daemon", "outbox", "list", "--limit", "0"); res.code != 2 || !strings.Contains(res.stderr, "--limit must be 1-500") {
		t.Errorf("outbox list --limit 0 (a usage error): exit %d\n%s", res.code, res.stderr)
	}
	// Two rows pend now: the next page's command keeps the listing's filter
	// and page size.
	if res := runCLI(t, e, "daemon", "outbox", "list", "--pending", "--limit", "1"); res.code != 0 ||
		!regexp.MustCompile(`more rows: claudemesh daemon outbox list --pending --limit 1 --before [0-9A-Z]{26}\n`).MatchString(res.stdout) {
		t.Errorf("outbox list --pending --limit 1: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	after := byClientID(listAll(t, c, ""))
	old, succ := after["op-dead"], after[rq.NewClientMessageID]
	if old.Status != "aborted" || old.AbortedBy == nil || *old.AbortedBy != "operator" || old.AbortedAt == nil ||
		old.SupersededBy == nil || *old.SupersededBy != rq.NewRowID {
		t.Errorf("old row after requeue: %+v", old)
	}
	if succ.ID != rq.NewRowID || succ.Status != "pending" || succ.Attempts != 0 || succ.RequestFingerprint != deadRow.RequestFingerprint ||
		succ.To != peer || succ.Mesh != deadRow.Mesh {
		t.Errorf("successor row %+v; old fingerprint %s", succ, deadRow.RequestFingerprint)
	}

	// The old id stays taken: the same request under it is a conflict now.
	r := post(t, c, bodies["op-dead"])
	if r.status != http.StatusConflict {
		t.Fatalf("resend of the requeued id: %d %s, want 409", r.status, r.body)
	}
	if m := r.json(t); str(m, "error") != "idempotency_key_reused" || str(m, "conflict") != "outbox_aborted_fingerprint_match" {
		t.Errorf("409 body %s", r.body)
	}

	// A done row is not eligible.
	res = runCLI(t, e, "daemon", "outbox", "requeue", doneRow.ID)
	if res.code == 0 || !strings.Contains(res.stderr, "requeue_not_eligible") {
		t.Errorf("requeue of a done row: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	// An unknown row is not found.
	res = runCLI(t, e, "daemon", "outbox", "requeue", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
	if res.code == 0 || !strings.Contains(res.stderr, "outbox_row_not_found") {
		t.Errorf("requeue of an unknown row: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	if got := byClientID(listAll(t, c, ""))["op-done"]; got.Status != "done" || got.SupersededBy != nil {
		t.Errorf("done row after a refused requeue: %+v", got)
	}

	// A pending row requeued with a patched payload gets a new target and fingerprint.
	patch := filepath.Join(t.TempDir(), "patch.json")
	if err := os.WriteFile(patch, []byte(`{"to":"@ops","message":"patched"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	res = runCLI(t, e, "daemon", "outbox", "requeue", pendingRow.ID, "--patch-payload", patch, "--json")
	if res.code != 0 {
		t.Fatalf("requeue --patch-payload: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	var pq requeueResult
	if err := json.Unmarshal([]byte(res.stdout), &pq); err != nil {
		t.Fatalf("requeue --json printed %q: %v", res.stdout, err)
	}
	after = byClientID(listAll(t, c, ""))
	patched := after[pq.NewClientMessageID]
	if pq.AbortedRowID != pendingRow.ID || patched.ID != pq.NewRowID || patched.Status != "pending" || patched.To != "@ops" ||
		patched.RequestFingerprint == pendingRow.RequestFingerprint || len(patched.RequestFingerprint) != 64 {
		t.Errorf("patched successor %+v (result %+v); old fingerprint %s", patched, pq, pendingRow.RequestFingerprint)
	}
	if o := after["op-pending"]; o.Status != "aborted" || o.SupersededBy == nil || *o.SupersededBy != pq.NewRowID {
		t.Errorf("pending row after a patched requeue: %+v", o)
	}
	if n := len(after); n != 5 {
		t.Errorf("%d rows, want 5 (3 sent, 2 successors)", n)
	}

	// Drop gives up on the patched successor: aborted with no successor, its
	// id still taken; dropping it again, or a done row, is refused.
	res = runCLI(t, e, "daemon", "outbox", "drop", pq.NewRowID, "--json")
	var dr struct {
		AbortedRowID    string `json:"aborted_row_id"`
		ClientMessageID string `json:"client_message_id"`
	}
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &dr) != nil || dr.AbortedRowID != pq.NewRowID ||
		dr.ClientMessageID != pq.NewClientMessageID {
		t.Fatalf("outbox drop: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if got := byClientID(listAll(t, c, ""))[pq.NewClientMessageID]; got.Status != "aborted" || got.SupersededBy != nil ||
		got.AbortedBy == nil || *got.AbortedBy != "operator" {
		t.Errorf("dropped row: %+v", got)
	}
	for _, id := range []string{pq.NewRowID, doneRow.ID} {
		if res := runCLI(t, e, "daemon", "outbox", "drop", id); res.code == 0 || !strings.Contains(res.stderr, "drop_not_eligible") {
			t.Errorf("drop of %s: exit %d, stderr:\n%s", id, res.code, res.stderr)
		}
	}
	if n := len(listAll(t, c, "")); n != 5 {
		t.Errorf("%d rows after the drop, want 5 (nothing deleted, nothing added)", n)
	}
	c.CloseIdleConnections()
	d.stop()

	if res := runCLI(t, e, "daemon", "outbox", "list"); res.code == 0 || !strings.Contains(res.stderr, "daemon not running") {
		t.Errorf("outbox list after stop: exit %d, stderr:\n%s", res.code, res.stderr)
	}

	// The stored payloads, byte for byte.
	db := openOutbox(t, e)
	payload := func(rowID string) (sendFrame, []byte) {
		t.Helper()
		var p, fp []byte
		if err := db.QueryRow("SELECT payload, request_fingerprint FROM outbox WHERE id = ?", rowID).Scan(&p, &fp); err != nil {
			t.Fatalf("row %s: %v", rowID, err)
		}
		var f sendFrame
		if err := json.Unmarshal(p, &f); err != nil {
			t.Fatalf("row %s payload %q: %v", rowID, p, err)
		}
		return f, fp
	}
	oldF, oldFP := payload(deadRow.ID)
	newF, newFP := payload(rq.NewRowID)
	if newF.ID != rq.NewClientMessageID || newF.ClientMessageID != rq.NewClientMessageID {
		t.Errorf("successor payload ids %q/%q, want %q", newF.ID, newF.ClientMessageID, rq.NewClientMessageID)
	}
	if oldF.ID != "op-dead" || oldF.ClientMessageID != "op-dead" {
		t.Errorf("the old row's payload changed ids: %+v", oldF)
	}
	if newF.Ciphertext == "" || newF.Nonce == "" || newF.Ciphertext != oldF.Ciphertext || newF.Nonce != oldF.Nonce ||
		newF.RequestFingerprint != oldF.RequestFingerprint || newF.TargetSpec != peer || newF.Type != "send" {
		t.Errorf("successor payload %+v differs from the old %+v beyond its ids", newF, oldF)
	}
	if hex.EncodeToString(newFP) != hex.EncodeToString(oldFP) || hex.EncodeToString(oldFP) != deadRow.RequestFingerprint {
		t.Errorf("request_fingerprint column: old %x new %x listed %s", oldFP, newFP, deadRow.RequestFingerprint)
	}
	pendF, _ := payload(pendingRow.ID)
	patF, patFP := payload(pq.NewRowID)
	if patF.TargetSpec != "@ops" || patF.ID != pq.NewClientMessageID || patF.ClientMessageID != pq.NewClientMessageID ||
		patF.RequestFingerprint != hex.EncodeToString(patFP) || patF.RequestFingerprint == pendF.RequestFingerprint {
		t.Errorf("patched payload %+v (column fingerprint %x), old %+v", patF, patFP, pendF)
	}
	if body, err := base64.StdEncoding.DecodeString(patF.Ciphertext); err != nil || string(body) != "patched" {
		t.Errorf("patched payload body %q (%v), want \"patched\"", body, err)
	}
}
