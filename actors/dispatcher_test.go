package actors

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// silentFirst is a broker in the upstream broker's manner (hello, then
// sends acked with {type:"ack", id, messageId, queued:true}) that does not
// answer the first attempt of each send: the daemon has to time it out.
type silentFirst struct {
	srv   *httptest.Server
	sends chan string // the client_message_id of every send frame, attempts included
}

func newSilentFirst(t *testing.T) *silentFirst {
	b := &silentFirst{sends: make(chan string, 64)}
	up := websocket.Upgrader{}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		seen := map[string]bool{}
		for {
			var f map[string]any
			if err := ws.ReadJSON(&f); err != nil {
				return
			}
			switch f["type"] {
			case "hello":
				ws.WriteJSON(map[string]any{"type": "hello_ack", "presenceId": "p"})
			case "send":
				id, _ := f["client_message_id"].(string)
				b.sends <- id
				if seen[id] {
					ws.WriteJSON(map[string]any{"type": "ack", "id": f["id"], "messageId": "bm-" + id, "queued": true})
				}
				seen[id] = true
			}
		}
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// TestAckTimeout: a send the broker never answers is timed out after the
// mesh's ack timeout, goes back to pending (ack_timeout, one attempt
// counted) and is sent again after its backoff; the second attempt's ack
// makes the row done. Other sends keep flowing meanwhile.
func TestAckTimeout(t *testing.T) {
	broker := newSilentFirst(t)
	id, _ := meshcrypto.GenerateIdentity()
	tree, _ := startTree(t, MeshConfig{Slug: "m", MeshID: "m-id", MemberID: "u", Identity: id, Legacy: true,
		URL: "ws" + strings.TrimPrefix(broker.srv.URL, "http") + "/ws", AckTimeout: 200 * time.Millisecond})
	root := tree.System.Root
	accept := func(cid string) {
		t.Helper()
		res, err := root.RequestFuture(tree.Accept, &messages.AcceptSend{Mesh: "m", ClientMessageID: cid, RowID: "row-" + cid,
			Fingerprint: messages.Fingerprint{1}, Payload: []byte(`{"type":"send","id":"` + cid + `","client_message_id":"` + cid + `"}`),
			Now: time.Now().UnixMilli()}, 5*time.Second).Result()
		if r, ok := res.(*messages.AcceptResult); err != nil || !ok || r.Err != nil {
			t.Fatalf("accept %s: %+v, %v", cid, res, err)
		}
	}
	next := func() string {
		t.Helper()
		select {
		case id := <-broker.sends:
			return id
		case <-time.After(10 * time.Second):
			t.Fatal("the broker got no send")
			return ""
		}
	}
	accept("slow")
	if got := next(); got != "slow" {
		t.Fatalf("first send %q", got)
	}
	accept("other")
	seen := map[string]int{}
	for seen["slow"] < 1 || seen["other"] < 2 { // both unanswered at first, both sent again
		seen[next()]++
	}
	var r map[string]messages.OutboxItem
	if err := wait.Until(10*time.Second, "both rows done after the retry", func() bool {
		r = outboxRows(t, tree, "")
		return r["slow"].Status == messages.StatusDone && r["other"].Status == messages.StatusDone
	}); err != nil {
		t.Fatalf("%v: %+v", err, r)
	}
	for _, cid := range []string{"slow", "other"} {
		if r[cid].Attempts != 2 || r[cid].BrokerMessageID == nil || *r[cid].BrokerMessageID != "bm-"+cid {
			t.Errorf("row %s: %+v, want done at attempt 2 with the broker's id", cid, r[cid])
		}
	}
}

// TestClassify is the answer table of a send (spec §4.6), for our broker's
// extended ack and the upstream broker's plain one (wire protocol §2.3's
// four error strings as they are written).
func TestClassify(t *testing.T) {
	after := int64(1500)
	for _, c := range []struct {
		name    string
		ack     messages.AckFrame
		outcome string
		bmid    string
		reason  string
		wait    time.Duration
		refusal int
	}{
		{"201", messages.AckFrame{Code: 201, BrokerMessageID: "b1", MessageID: "m1", HistoryID: "h1"}, messages.OutcomeDone, "b1", "", 0, notRefused},
		{"200 duplicate", messages.AckFrame{Code: 200, MessageID: "m2", Duplicate: true}, messages.OutcomeDone, "m2", "", 0, notRefused},
		{"409", messages.AckFrame{Code: 409, Error: "idempotency_key_reused", Conflict: "broker_fingerprint_mismatch"},
			messages.OutcomeDead, "", "idempotency_key_reused: broker_fingerprint_mismatch", 0, notRefused},
		{"429 with retry_after_ms", messages.AckFrame{Code: 429, Error: "rate_limited", RetryAfterMs: &after},
			messages.OutcomeRetry, "", "rate_limited", 1500 * time.Millisecond, refusedRateLimit},
		{"503", messages.AckFrame{Code: 503, Error: "store_unavailable"}, messages.OutcomeRetry, "", "store_unavailable", 0, notRefused},
		{"404", messages.AckFrame{Code: 404, Error: "unknown_recipient"}, messages.OutcomeDead, "", "unknown_recipient", 0, notRefused},
		{"413", messages.AckFrame{Code: 413, Error: "payload_too_large"}, messages.OutcomeDead, "", "payload_too_large", 0, notRefused},
		{"upstream success", messages.AckFrame{Queued: true, MessageID: "m3"}, messages.OutcomeDone, "m3", "", 0, notRefused},
		{"upstream rate limit", messages.AckFrame{Error: "rate_limit: max 60 msg/min (burst 10) — slow down"}, messages.OutcomeRetry, "",
			"rate_limit: max 60 msg/min (burst 10) — slow down", 0, refusedRateLimit},
		{"upstream no peer", messages.AckFrame{Error: upstreamNoPeer}, messages.OutcomeRetry, "", upstreamNoPeer, 0, refusedNoPeer},
		{"upstream too large", messages.AckFrame{Error: "payload too large: 70000 bytes > MAX_MESSAGE_BYTES=65536"}, messages.OutcomeDead, "",
			"payload too large: 70000 bytes > MAX_MESSAGE_BYTES=65536", 0, notRefused},
		{"upstream grants", messages.AckFrame{Error: "blocked by recipient grants (sender lacks dm capability)"}, messages.OutcomeDead, "",
			"blocked by recipient grants (sender lacks dm capability)", 0, notRefused},
	} {
		out, wait, refusal := classify(&c.ack)
		if out.Outcome != c.outcome || out.BrokerMessageID != c.bmid || out.Reason != c.reason || wait != c.wait || refusal != c.refusal {
			t.Errorf("%s: %+v, wait %s, refusal %d; want %s %q %q %s %d", c.name, out, wait, refusal, c.outcome, c.bmid, c.reason, c.wait, c.refusal)
		}
		if c.name == "201" && out.HistoryID != "h1" {
			t.Errorf("201: history id %q", out.HistoryID)
		}
	}
}

const upstreamNoPeer = "no connected peer for target (not online, or targetSpec is your own key without another session)"
