package integration

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
)

// upstreamStandIn imitates the upstream TypeScript broker where it matters:
// hello → hello_ack; feature_negotiation_request is ignored (unknown to it);
// send → {type:"ack", id, messageId, queued:true}.
type upstreamStandIn struct {
	srv          *httptest.Server
	mu           sync.Mutex
	hellos       int
	negotiations int
	sends        []map[string]any
}

func newUpstreamStandIn(t *testing.T) *upstreamStandIn {
	u := &upstreamStandIn{}
	up := websocket.Upgrader{}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			var f map[string]any
			if err := ws.ReadJSON(&f); err != nil {
				return
			}
			u.mu.Lock()
			var reply any
			switch f["type"] {
			case "hello":
				u.hellos++
				reply = map[string]any{"type": "hello_ack", "presenceId": "presence-" + ulid.Make().String(), "memberDisplayName": f["displayName"]}
			case "feature_negotiation_request":
				u.negotiations++ // the upstream broker does not know it: no answer
			case "send":
				u.sends = append(u.sends, f)
				reply = map[string]any{"type": "ack", "id": f["id"], "messageId": "upstream-" + str(f, "id"), "queued": true}
			}
			u.mu.Unlock()
			if reply != nil {
				if err := ws.WriteJSON(reply); err != nil {
					return
				}
			}
		}
	})
	u.srv = httptest.NewServer(mux)
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstreamStandIn) counts() (hellos, negotiations, sends int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.hellos, u.negotiations, len(u.sends)
}

// TestE2EStrictVersusLegacy: a broker that ignores the feature negotiation
// stops a strict daemon (exit non-zero naming --legacy-broker); with
// --legacy-broker the daemon delivers to it and records its messageId.
func TestE2EStrictVersusLegacy(t *testing.T) {
	t.Parallel()
	u := newUpstreamStandIn(t)
	e := newEnv(t)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]any{"meshes": []map[string]string{{"meshId": ulid.Make().String(), "memberId": ulid.Make().String(),
		"slug": "upstream", "name": "carol", "pubkey": hex.EncodeToString(pub), "secretKey": hex.EncodeToString(priv),
		"brokerUrl": "ws" + strings.TrimPrefix(u.srv.URL, "http") + "/ws"}}}
	b, _ := json.Marshal(doc)
	if err := os.WriteFile(filepath.Join(e.configDir, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}

	// Strict (no flag): the negotiation goes unanswered → fatal.
	strict := spawnDaemon(t, e, "--no-tcp")
	strict.waitExit(e2eRecoveryDeadline)
	if code := strict.exitCode(); code != 5 {
		t.Fatalf("strict daemon exited %d against a broker that ignores the negotiation, want 5; stderr:\n%s", code, strict.stderr)
	}
	if !strings.Contains(strict.stderr.String(), "--legacy-broker") {
		t.Fatalf("strict daemon's stderr does not name --legacy-broker:\n%s", strict.stderr)
	}
	hellos, negotiations, sends := u.counts()
	if hellos < 1 || negotiations < 1 || sends != 0 {
		t.Fatalf("stand-in saw %d hellos, %d negotiation requests, %d sends; want ≥1, ≥1, 0", hellos, negotiations, sends)
	}
	t.Logf("strict daemon exited %d after %s", strict.exitCode(), time.Since(strict.started).Round(time.Millisecond))

	// Legacy: starts, sends, records the upstream messageId.
	legacy := &e2ePeer{name: "carol", env: e, pubkey: hex.EncodeToString(pub)}
	legacy.start(t, "--legacy-broker")
	legacy.d.waitLog("legacy_broker", 1) // the loud warning, once connected
	peer, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if st, body, err := trySend(legacy.c, hex.EncodeToString(peer), "to the upstream broker", "legacy-1"); err != nil || st != http.StatusAccepted {
		t.Fatalf("send legacy-1: status %d, %v: %s", st, err, body)
	}
	var row outboxItem
	wait.For(t, e2eDeliverDeadline, "the legacy-1 row to be done", func() bool {
		r, ok := byClientID(listAll(t, legacy.c, messages.StatusDone))["legacy-1"]
		row = r
		return ok
	})
	if row.BrokerMessageID == nil || *row.BrokerMessageID != "upstream-legacy-1" {
		t.Fatalf("legacy-1 row %+v, want broker_message_id upstream-legacy-1", row)
	}
	_, negotiationsAfter, sends := u.counts()
	if negotiationsAfter != negotiations || sends != 1 {
		t.Fatalf("legacy daemon: stand-in saw %d more negotiation requests and %d sends; want 0 and 1", negotiationsAfter-negotiations, sends)
	}
	u.mu.Lock()
	f := u.sends[0]
	u.mu.Unlock()
	if f["id"] != "legacy-1" || f["targetSpec"] != hex.EncodeToString(peer) || strings.Contains(str(f, "ciphertext"), "upstream broker") {
		t.Fatalf("send frame at the stand-in: %v", f)
	}
}
