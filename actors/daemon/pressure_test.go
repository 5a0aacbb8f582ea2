package daemon_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/config"
)

// TestDiskPressure: with a reserve larger than the free space, a send is
// refused 507 insufficient_storage and nothing is written, reads keep
// answering and outbox_pressure_high is on the event log; once the limits
// allow it again (as a SIGHUP reload sets them), the daemon accepts sends
// by itself.
func TestDiskPressure(t *testing.T) {
	h := startDaemonWith(t, func(f *config.File) { f.Disk.ReservedMB = 1 << 40 }) // a reserve no disk has
	st, body := h.post("/v1/send", `{"to":"#p","message":"m","client_message_id":"full-1"}`)
	if st != http.StatusInsufficientStorage || body["error"] != "insufficient_storage" {
		t.Fatalf("send under pressure: %d %v", st, body)
	}
	if n := h.rows(`1 = 1`); n != 0 {
		t.Fatalf("%d outbox rows after a refused send", n)
	}
	if st, hb := h.get("/v1/health"); st != http.StatusOK || hb["disk_pressure"] != "refuse" {
		t.Fatalf("GET /v1/health under pressure: %d %v", st, hb)
	}
	if st, _ := h.get("/v1/outbox"); st != http.StatusOK {
		t.Fatalf("GET /v1/outbox under pressure: %d", st)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://localhost/v1/events", nil)
	req.Header.Set("Last-Event-ID", "0")
	resp, err := h.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, _ := io.ReadAtLeast(resp.Body, buf, len("event: outbox_pressure_high"))
	resp.Body.Close()
	if !strings.Contains(string(buf[:n]), "event: outbox_pressure_high") {
		t.Fatalf("no outbox_pressure_high on the event log: %q", buf[:n])
	}

	h.d.SetDiskLimits(1<<30, 0) // space is back
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, body = h.post("/v1/send", `{"to":"#p","message":"m","client_message_id":"full-1"}`)
		if st == http.StatusAccepted || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // poll interval; the store rechecks every second
	}
	if st != http.StatusAccepted {
		t.Fatalf("send after the space came back: %d %v", st, body)
	}
}
