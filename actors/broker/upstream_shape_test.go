package broker

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

// TestPeersListUpstreamShape: our broker's peers_list entry for a peer
// that joined no group has every member of upstream's entry, of the same
// JSON kind: "groups" is [] as upstream's, not null.
func TestPeersListUpstreamShape(t *testing.T) {
	raw, err := os.ReadFile("testdata/upstream-peers-list.json")
	if err != nil {
		t.Fatal(err)
	}
	var upstream struct {
		Peers []map[string]any `json:"peers"`
	}
	if err := json.Unmarshal(raw, &upstream); err != nil || len(upstream.Peers) != 1 {
		t.Fatalf("testdata: %v", err)
	}
	backends(t, noLimit, func(t *testing.T, e *env) {
		bob := e.member("bob")
		hello := e.hello(bob, "s-1")
		hello["cwd"] = "/w"
		b := e.connectWith(hello)
		b.send(map[string]any{"type": "list_peers", "_reqId": "pl-1"})
		peers, _ := b.next("peers_list")["peers"].([]any)
		if len(peers) != 1 {
			t.Fatalf("peers %v, want bob alone", peers)
		}
		ours, _ := peers[0].(map[string]any)
		for k, want := range upstream.Peers[0] {
			if got, ok := ours[k]; !ok || fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) {
				t.Errorf("%q is %#v (present: %v); upstream's is %#v", k, got, ok, want)
			}
		}
	})
}
