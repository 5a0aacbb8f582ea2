package daemon_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// TestMetrics: GET /v1/metrics answers the Prometheus text format with the
// daemon's series, counted from real requests through the socket.
func TestMetrics(t *testing.T) {
	h := startDaemon(t)
	peer, err := meshcrypto.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"to":"#metricsTopic0000000000000","message":"one","client_message_id":"m-1"}`,
		`{"to":"#metricsTopic0000000000000","message":"two","client_message_id":"m-2"}`,
		`{"to":"#metricsTopic0000000000000","message":"one","client_message_id":"m-1"}`, // the same request again
		`{"to":"*","message":"all","client_message_id":"m-3"}`,
		`{"to":"` + peer.PublicKeyHex() + `","message":"dm","client_message_id":"m-4"}`,
	} {
		if st, _ := h.post("/v1/send", body); st != http.StatusAccepted {
			t.Fatalf("send %s: %d", body, st)
		}
	}
	if st, _ := h.post("/v1/send", `{"to":"#metricsTopic0000000000000","message":"changed","client_message_id":"m-1"}`); st != http.StatusConflict {
		t.Fatalf("conflicting reuse: %d", st)
	}

	resp, err := h.hc.Get("http://localhost/v1/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /v1/metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	text := string(raw)
	for _, want := range []string{
		`cm_daemon_send_total{kind="topic",mesh="local",status="queued"} 3`,
		`cm_daemon_send_total{kind="topic",mesh="local",status="conflict"} 1`,
		`cm_daemon_send_total{kind="broadcast",mesh="local",status="queued"} 1`,
		`cm_daemon_send_total{kind="dm",mesh="local",status="queued"} 1`,
		`cm_daemon_dedupe_total{direction="out",mesh="local"} 1`,
		`cm_daemon_outbox_depth{mesh="local",status="pending"} 4`,
		`cm_daemon_outbox_depth{mesh="local",status="dead"} 0`,
		`cm_daemon_connected{mesh="local"} 0`,
		`cm_daemon_ipc_requests_total{endpoint="/v1/send",status="202",transport="uds"} 5`,
		`cm_daemon_ipc_requests_total{endpoint="/v1/send",status="409",transport="uds"} 1`,
		`cm_daemon_store_commit_seconds_count{db="outbox",durability="wal_sync"}`,
		`cm_daemon_store_batch_size_count`,
		`cm_daemon_sse_streams 0`,
		"go_goroutines ", "process_resident_memory_bytes ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("GET /v1/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("GET /v1/metrics:\n%s", text)
	}
	// An unknown path is counted as "other", never by its own name.
	h.get("/v1/no-such-route-" + strings.Repeat("x", 8))
	resp, err = h.hc.Get("http://localhost/v1/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(raw), `cm_daemon_ipc_requests_total{endpoint="other",status="404",transport="uds"} 1`) ||
		strings.Contains(string(raw), "no-such-route") {
		t.Errorf("the unknown path is not counted as other:\n%s", raw)
	}
}
