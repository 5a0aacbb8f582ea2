package daemon_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// TestDiskPressure: with a reserve larger than the free space the daemon is
// degraded: a send is refused 507 insufficient_storage and nothing is
// written, a new event stream is refused 503 daemon_degraded while one
// already open goes on, reads keep answering. At 95–100 % (here the outbox
// at 97 % of its cap) sends are still refused but event streams open again,
// with outbox_pressure_high on the event log. Once the limits allow it
// (as a SIGHUP reload sets them), the daemon accepts sends by itself.
func TestDiskPressure(t *testing.T) {
	h := startDaemonWith(t, func(f *config.File) {})
	open, err := h.hc.Get("http://localhost/v1/events") // before the pressure
	if err != nil || open.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/events: %v %v", open, err)
	}
	defer open.Body.Close()

	h.d.SetDiskLimits(1<<30, 1<<50) // a reserve no disk has: degraded
	waitPressure(t, h, "degraded")
	st, body := h.post("/v1/send", `{"to":"@p","message":"m","client_message_id":"full-1"}`)
	if st != http.StatusInsufficientStorage || body["error"] != "insufficient_storage" {
		t.Fatalf("send when degraded: %d %v", st, body)
	}
	if n := h.rows(`1 = 1`); n != 0 {
		t.Fatalf("%d outbox rows after a refused send", n)
	}
	if st, hb := h.get("/v1/health"); st != http.StatusOK || hb["degraded"] != true {
		t.Fatalf("GET /v1/health when degraded: %d %v", st, hb)
	}
	for _, path := range []string{"/v1/outbox", "/v1/inbox"} {
		if st, _ := h.get(path); st != http.StatusOK {
			t.Fatalf("GET %s when degraded: %d", path, st)
		}
	}
	if st, eb := h.get("/v1/events"); st != http.StatusServiceUnavailable || eb["error"] != "daemon_degraded" {
		t.Fatalf("a new event stream when degraded: %d %v", st, eb)
	}
	buf := make([]byte, 4096) // the stream opened before goes on: it gets the pressure event
	n, _ := io.ReadAtLeast(open.Body, buf, len("event: outbox_pressure_high"))
	if !strings.Contains(string(buf[:n]), "event: outbox_pressure_high") {
		t.Fatalf("the open stream did not get outbox_pressure_high: %q", buf[:n])
	}

	h.d.SetDiskLimits(outboxBytes(t, h)*100/97, 0) // the outbox at 97 % of its cap: refuse, not degraded
	waitPressure(t, h, "refuse")
	if st, body = h.post("/v1/send", `{"to":"@p","message":"m","client_message_id":"full-1"}`); st != http.StatusInsufficientStorage {
		t.Fatalf("send at refuse: %d %v", st, body)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://localhost/v1/events", nil)
	req.Header.Set("Last-Event-ID", "0")
	resp, err := h.hc.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/events at refuse: %v %v", resp, err)
	}
	n, _ = io.ReadAtLeast(resp.Body, buf, len("event: outbox_pressure_high"))
	resp.Body.Close()
	if !strings.Contains(string(buf[:n]), "event: outbox_pressure_high") {
		t.Fatalf("no outbox_pressure_high on the event log: %q", buf[:n])
	}

	h.d.SetDiskLimits(1<<30, 0) // space is back
	waitPressure(t, h, "normal")
	if st, body = h.post("/v1/send", `{"to":"@p","message":"m","client_message_id":"full-1"}`); st != http.StatusAccepted {
		t.Fatalf("send after the space came back: %d %v", st, body)
	}
}

// waitPressure waits until /v1/health reports the level: the store
// measures again every second while the pressure is not normal.
func waitPressure(t *testing.T, h *harness, level string) {
	t.Helper()
	var hb map[string]any
	if err := wait.Until(5*time.Second, "disk_pressure "+level, func() bool {
		_, hb = h.get("/v1/health")
		return hb["disk_pressure"] == level
	}); err != nil {
		t.Fatalf("%v: it is %v", err, hb["disk_pressure"])
	}
}

// outboxBytes is the size of outbox.db and its WAL.
func outboxBytes(t *testing.T, h *harness) int64 {
	t.Helper()
	n, err := persistence.FileBytes(h.paths.OutboxDB())
	if err != nil {
		t.Fatal(err)
	}
	return n
}
