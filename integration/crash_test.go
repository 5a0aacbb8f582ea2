package integration

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// streamBody is the /v1/send body of stream id.
func streamBody(id string) string {
	return fmt.Sprintf(`{"to":"@load","message":"body of %s","client_message_id":%q}`, id, id)
}

// acceptStream runs workers goroutines that POST unique ids over the socket
// as fast as they can. Once minAccepted sends were answered 202 it calls
// interrupt (which must end the daemon), lets the workers run into the dead
// daemon and returns every id answered 202 and the number of requests made.
func acceptStream(t *testing.T, e *env, prefix string, workers, minAccepted int, interrupt func()) (got202 []string, requests int64) {
	t.Helper()
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	var (
		accepted, attempts atomic.Int64
		stopped            atomic.Bool
		wg                 sync.WaitGroup
		mu                 sync.Mutex
		failures           []string // unexpected answers before the interrupt
	)
	fail := func(s string) {
		mu.Lock()
		failures = append(failures, s)
		mu.Unlock()
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []string
			defer func() {
				mu.Lock()
				got202 = append(got202, mine...)
				mu.Unlock()
			}()
			for i := 0; !stopped.Load(); i++ {
				id := fmt.Sprintf("%s-%02d-%06d", prefix, w, i)
				req, err := http.NewRequest(http.MethodPost, "http://localhost/v1/send", strings.NewReader(streamBody(id)))
				if err != nil {
					fail(err.Error())
					return
				}
				attempts.Add(1)
				resp, err := c.Do(req)
				if err != nil {
					if !stopped.Load() {
						fail(fmt.Sprintf("%s: %v", id, err))
					}
					return
				}
				resp.Body.Close()
				switch {
				case resp.StatusCode == http.StatusAccepted:
					// A 202 read after the interrupt was still committed before it was written.
					mine = append(mine, id)
					accepted.Add(1)
				case !stopped.Load():
					fail(fmt.Sprintf("%s: status %d", id, resp.StatusCode))
					return
				}
			}
		}()
	}
	wait.For(t, 30*time.Second, fmt.Sprintf("%d accepted sends", minAccepted), func() bool {
		mu.Lock()
		bad := len(failures)
		mu.Unlock()
		return accepted.Load() >= int64(minAccepted) || bad > 0
	})
	stopped.Store(true)
	interrupt()
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("sends failed before the interrupt: %v", failures[:min(len(failures), 5)])
	}
	t.Logf("%d of %d sends answered 202 before the interrupt", len(got202), attempts.Load())
	if len(got202) < minAccepted {
		t.Fatalf("only %d sends were accepted", len(got202))
	}
	return got202, attempts.Load()
}

// checkStreamRows lists the outbox of a running daemon: every id answered
// 202 is there exactly once, every row is pending, and there are no more
// rows than requests. It returns the number of rows.
func checkStreamRows(t *testing.T, c *http.Client, got202 []string, requests int64) int {
	t.Helper()
	rows := listAll(t, c, "")
	seen := make(map[string]int, len(rows))
	for _, r := range rows {
		seen[r.ClientMessageID]++
		if r.Status != "pending" {
			t.Errorf("row %s (%s) is %s after restart, want pending", r.ID, r.ClientMessageID, r.Status)
		}
	}
	for _, id := range got202 {
		if n := seen[id]; n != 1 {
			t.Errorf("id %s was answered 202 but appears %d times in the outbox", id, n)
		}
	}
	if int64(len(rows)) > requests {
		t.Errorf("%d rows for %d requests", len(rows), requests)
	}
	return len(rows)
}

// checkOutboxFile checks outbox.db of a stopped daemon: rows ids unique, none
// inflight, the count the API listed, integrity ok.
func checkOutboxFile(t *testing.T, e *env, wantRows int) {
	t.Helper()
	db := openOutbox(t, e)
	defer db.Close()
	var total, distinct, inflight int
	if err := db.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT client_message_id),
	       COUNT(*) FILTER (WHERE status = 'inflight') FROM outbox`).Scan(&total, &distinct, &inflight); err != nil {
		t.Fatal(err)
	}
	if total != distinct || total != wantRows || inflight != 0 {
		t.Errorf("outbox.db: %d rows, %d distinct ids, %d inflight; the API listed %d", total, distinct, inflight, wantRows)
	}
	var check string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check: %q %v", check, err)
	}
}

// TestKill9DuringAcceptStream: every send answered 202 before a SIGKILL is in
// the outbox after a restart, exactly once, and its id keeps its fingerprint.
func TestKill9DuringAcceptStream(t *testing.T) {
	e := newEnv(t)
	d := startDaemon(t, e, "--no-tcp")
	got202, requests := acceptStream(t, e, "k9", 16, 300, d.kill9)
	if code := d.exitCode(); code != -1 {
		t.Fatalf("daemon exit code %d after SIGKILL, want -1 (killed by a signal)", code)
	}

	d2 := startDaemon(t, e, "--no-tcp")
	c2 := unixClient(e.socket())
	rows := checkStreamRows(t, c2, got202, requests)

	// The same id and body after the restart is the same request; another body is a conflict.
	id := got202[len(got202)/2]
	if r := post(t, c2, []byte(streamBody(id))); r.status != http.StatusAccepted || str(r.json(t), "status") != "queued" {
		t.Errorf("resend of %s with the same body: %d %s, want 202 queued", id, r.status, r.body)
	}
	// The id may also come in the Idempotency-Key header: same fingerprint.
	req := newRequest(t, http.MethodPost, "http://localhost/v1/send", []byte(fmt.Sprintf(`{"to":"@load","message":"body of %s"}`, id)))
	req.Header.Set("Idempotency-Key", id)
	if r := do(t, c2, req); r.status != http.StatusAccepted || str(r.json(t), "status") != "queued" {
		t.Errorf("resend of %s through Idempotency-Key: %d %s, want 202 queued", id, r.status, r.body)
	}
	r := post(t, c2, []byte(fmt.Sprintf(`{"to":"@load","message":"another body","client_message_id":%q}`, id)))
	if r.status != http.StatusConflict {
		t.Fatalf("resend of %s with another body: %d %s, want 409", id, r.status, r.body)
	}
	m := r.json(t)
	if str(m, "error") != "idempotency_key_reused" || str(m, "conflict") != "outbox_pending_fingerprint_mismatch" ||
		str(m, "client_message_id") != id || !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(str(m, "daemon_fingerprint_prefix")) {
		t.Errorf("409 body %s", r.body)
	}
	if n := len(listAll(t, c2, "")); n != rows {
		t.Errorf("resends changed the row count from %d to %d", rows, n)
	}
	c2.CloseIdleConnections()
	d2.stop()
	checkOutboxFile(t, e, rows)
}

// TestKill9RelaxedFsyncModes: under [outbox] fsync_mode batched_50ms and
// off the 202 does not wait for an fsync, yet a crash of the process loses
// nothing answered (the commit is in the WAL, in the kernel's page cache):
// every 202 is in the outbox after a SIGKILL and a restart, exactly once,
// and the file checks clean.
func TestKill9RelaxedFsyncModes(t *testing.T) {
	for _, mode := range []string{"batched_50ms", "off"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			writeConfigTOML(t, e, "[outbox]\nfsync_mode = \""+mode+"\"\n")
			d := startDaemon(t, e, "--no-tcp")
			if got := d.waitLog("daemon_started", 1)[0]["fsync_mode"]; got != mode {
				t.Fatalf("daemon_started says fsync_mode %v, want %s", got, mode)
			}
			got202, requests := acceptStream(t, e, "fs-"+mode, 16, 300, d.kill9)
			restartAndCheckStream(t, e, got202, requests)
			t.Logf("fsync_mode %s: %d sends answered 202 before the SIGKILL, all stored once after the restart", mode, len(got202))
		})
	}
}

// TestSIGTERMDuringAcceptStream: a graceful stop in the middle of a stream
// of sends exits 0, and every send answered 202 is stored exactly once.
func TestSIGTERMDuringAcceptStream(t *testing.T) {
	e := newEnv(t)
	d := startDaemon(t, e, "--no-tcp")
	got202, requests := acceptStream(t, e, "term", 16, 300, d.stop)
	restartAndCheckStream(t, e, got202, requests)
}

// restartAndCheckStream starts the daemon again after a stream of sends was
// interrupted, checks its rows through the API (checkStreamRows), stops it
// and checks the file (checkOutboxFile).
func restartAndCheckStream(t *testing.T, e *env, got202 []string, requests int64) {
	t.Helper()
	d := startSettled(t, e, "--no-tcp")
	c := unixClient(e.socket())
	rows := checkStreamRows(t, c, got202, requests)
	c.CloseIdleConnections()
	d.stop()
	checkOutboxFile(t, e, rows)
}

// TestCrashRecoveryReturnsInflightToPending: start-up turns every inflight
// row back into pending with one more attempt and a next attempt no earlier
// than the start, and leaves other rows alone.
func TestCrashRecoveryReturnsInflightToPending(t *testing.T) {
	e := newEnv(t)
	d := startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	ids := []string{"rec-1", "rec-2", "rec-3", "rec-pending", "rec-done"}
	for _, id := range ids {
		mustSend(t, c, "*", "recover "+id, id)
	}
	c.CloseIdleConnections()
	d.stop()

	execSQL(t, e,
		`UPDATE outbox SET status = 'inflight', attempts = 1, next_attempt_at = 0
		  WHERE client_message_id IN ('rec-1', 'rec-2', 'rec-3')`,
		`UPDATE outbox SET status = 'done', attempts = 1, delivered_at = 1, broker_message_id = 'b-1'
		  WHERE client_message_id = 'rec-done'`)

	start := time.Now()
	d = startDaemon(t, e, "--no-tcp")
	c = unixClient(e.socket())
	rows := byClientID(listAll(t, c, ""))
	if len(rows) != len(ids) {
		t.Fatalf("%d rows after restart, want %d", len(rows), len(ids))
	}
	for _, id := range ids[:3] {
		r := rows[id]
		if r.Status != "pending" || r.Attempts != 2 {
			t.Errorf("%s: status %s attempts %d, want pending 2", id, r.Status, r.Attempts)
		}
		next, err := time.Parse(time.RFC3339Nano, r.NextAttemptAt)
		if err != nil {
			t.Fatalf("%s: next_attempt_at %q: %v", id, r.NextAttemptAt, err)
		}
		if next.Before(start.Truncate(time.Millisecond)) {
			t.Errorf("%s: next_attempt_at %s is before the start at %s", id, next, start)
		}
	}
	if r := rows["rec-pending"]; r.Status != "pending" || r.Attempts != 0 {
		t.Errorf("rec-pending: status %s attempts %d, want pending 0 (untouched)", r.Status, r.Attempts)
	}
	if r := rows["rec-done"]; r.Status != "done" || r.Attempts != 1 {
		t.Errorf("rec-done: status %s attempts %d, want done 1 (untouched)", r.Status, r.Attempts)
	}
	if got := len(listAll(t, c, "inflight")); got != 0 {
		t.Errorf("%d inflight rows after start-up", got)
	}
	// The recovery is logged with its row count.
	if log := d.stderr.String(); !strings.Contains(log, `"msg":"outbox_inflight_recovered"`) || !strings.Contains(log, `"rows":3`) {
		t.Errorf("no outbox_inflight_recovered log with rows 3:\n%s", log)
	}
	c.CloseIdleConnections()
	d.stop()
}
