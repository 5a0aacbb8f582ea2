package ipcserver

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestPeerDirectory: a fresh kept list answers a name it gives once
// without asking the broker; a miss, an ambiguity or an old list asks
// again and keeps the answer; a broker that does not answer leaves the
// kept list, however old, and with none the broker's error.
func TestPeerDirectory(t *testing.T) {
	bob := messages.Peer{Pubkey: "B0B0000000000000000000000000000000000000000000000000000000000000", DisplayName: "bob"}
	ann := messages.Peer{Pubkey: "a0a0000000000000000000000000000000000000000000000000000000000000", DisplayName: "ann"}
	bob2 := messages.Peer{Pubkey: "b0b2000000000000000000000000000000000000000000000000000000000000", DisplayName: "Bob"}
	var d peerDirectory
	fetches := 0
	broker := []messages.Peer{bob}
	var brokerErr error
	fetch := func() ([]messages.Peer, error) {
		fetches++
		return broker, brokerErr
	}
	t0 := time.Unix(1_000_000, 0)
	step := func(name, to string, at time.Time, wantFound []messages.Peer, wantFetches int) {
		t.Helper()
		_, found, err := d.resolve("demo", to, at, fetch)
		if err != nil || len(found) != len(wantFound) || fetches != wantFetches {
			t.Fatalf("%s: found %v, %v after %d fetches; want %v after %d", name, found, err, fetches, wantFound, wantFetches)
		}
		for i := range found {
			if found[i].Pubkey != wantFound[i].Pubkey {
				t.Fatalf("%s: found %v, want %v", name, found, wantFound)
			}
		}
	}
	step("first sight asks", "bob", t0, []messages.Peer{bob}, 1)
	step("a fresh list answers", "BOB", t0.Add(PeerListMaxAge-time.Millisecond), []messages.Peer{bob}, 1)
	broker = []messages.Peer{bob, ann}
	step("a miss asks again", "ann", t0.Add(time.Second), []messages.Peer{ann}, 2)
	step("kept from the miss", "ann", t0.Add(2*time.Second), []messages.Peer{ann}, 2)
	step("unknown asks and stays unknown", "zed", t0.Add(3*time.Second), nil, 3)
	broker = []messages.Peer{bob, ann, bob2}
	step("an old list asks", "bob", t0.Add(3*time.Second+PeerListMaxAge), []messages.Peer{bob, bob2}, 4)
	step("an ambiguity asks each time", "bob", t0.Add(3*time.Second+PeerListMaxAge), []messages.Peer{bob, bob2}, 5)
	brokerErr = errors.New("not connected")
	step("broker away: the kept list however old", "ann", t0.Add(time.Hour), []messages.Peer{ann}, 6)
	if _, _, err := d.resolve("other", "bob", t0, fetch); !errors.Is(err, brokerErr) {
		t.Fatalf("a mesh with no list and no broker: %v, want the broker's error", err)
	}
}

// TestResolveFromKeptPeers: a send by name on a mesh whose broker is away,
// or does not answer within messages.NameTimeout, resolves from the peer
// list the connection kept; a name that list lacks, or a mesh that kept
// none, is 503 broker_unavailable saying the name was never seen.
func TestResolveFromKeptPeers(t *testing.T) {
	bob := messages.Peer{Pubkey: "B0B0000000000000000000000000000000000000000000000000000000000000", DisplayName: "bob"}
	h := newHarness(t, withConns(map[string]*fakeConn{
		"away":   {down: true, kept: []messages.Peer{bob}},
		"silent": {silent: true, kept: []messages.Peer{bob}},
		"never":  {down: true},
	}))
	resolve := func(slug, to string) (string, time.Duration, error) {
		t.Helper()
		send, err := messages.DecodeSend([]byte(`{"to":"`+to+`","message":"x"}`), "", false)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = h.srv.resolveRecipient(&Mesh{Info: messages.MeshInfo{Mesh: slug}}, send)
		return send.Destination.TargetSpec, time.Since(start), err
	}
	key := strings.ToLower(bob.Pubkey)
	if got, took, err := resolve("away", "BOB"); err != nil || got != key || took >= messages.NameTimeout {
		t.Fatalf("bob, the broker away: %q after %v, %v; want %s at once", got, took, err, key)
	}
	if got, took, err := resolve("silent", "bob"); err != nil || got != key || took < messages.NameTimeout {
		t.Fatalf("bob, the broker silent: %q after %v, %v; want %s after %v", got, took, err, key, messages.NameTimeout)
	}
	for _, c := range []struct{ slug, to string }{{"away", "zed"}, {"never", "bob"}} {
		_, _, err := resolve(c.slug, c.to)
		var me *messages.Error
		if !errors.As(err, &me) || me.Status != http.StatusServiceUnavailable || me.Code != messages.CodeBrokerUnavailable ||
			!strings.Contains(me.Detail, "never seen") {
			t.Errorf("%s on %s: %v; want 503 broker_unavailable, never seen", c.to, c.slug, err)
		}
	}
}
