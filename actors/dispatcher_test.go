package actors

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

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
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := outboxRows(t, tree, "")
		if r["slow"].Status == messages.StatusDone && r["other"].Status == messages.StatusDone {
			for _, cid := range []string{"slow", "other"} {
				if r[cid].Attempts != 2 || r[cid].BrokerMessageID == nil || *r[cid].BrokerMessageID != "bm-"+cid {
					t.Errorf("row %s: %+v, want done at attempt 2 with the broker's id", cid, r[cid])
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rows not done after the retry: %+v", r)
		}
		time.Sleep(20 * time.Millisecond) // poll interval: the condition is re-checked
	}
}
