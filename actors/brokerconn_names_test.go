package actors

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// TestKeptNamesAnswerASilentBroker: a connection whose broker takes the
// hello and then answers nothing resolves a `#name` from the names its
// route kept in outbox.db once messages.NameTimeout has passed; a name
// never seen is refused with 503 broker_unavailable saying so, and an
// id-shaped ref passes as it is; the kept peer list is answered as kept,
// and a route that kept none says so. With no broker at all, the kept names
// answer at once.
func TestKeptNamesAnswerASilentBroker(t *testing.T) {
	broker := newSilentFirst(t)
	tree, _ := startTree(t)
	root := tree.System.Root
	bob := messages.Peer{DisplayName: "bob", Pubkey: strings.Repeat("b", 64), MemberPubkey: strings.Repeat("b", 64)}
	for _, m := range []*messages.KeepNames{
		{Route: "m", Kind: messages.KeptTopicNames, Topics: map[string]string{"builds": "T-builds"}},
		{Route: "m", Kind: messages.KeptPeerNames, Peers: []messages.Peer{bob}},
		{Route: "gone", Kind: messages.KeptTopicNames, Topics: map[string]string{"builds": "T-builds"}},
	} {
		root.Send(tree.Store, m)
	}
	attach := func(slug, url string) MeshPIDs {
		t.Helper()
		id, _ := meshcrypto.GenerateIdentity()
		pids, err := tree.Attach(MeshConfig{Slug: slug, MeshID: slug + "-id", MemberID: "u", Identity: id, Legacy: true, URL: url})
		if err != nil {
			t.Fatal(err)
		}
		return pids
	}
	silent := attach("m", "ws"+strings.TrimPrefix(broker.srv.URL, "http")+"/ws")
	wait.For(t, 10*time.Second, "the connection to the silent broker", func() bool {
		res, err := root.RequestFuture(silent.Conn, &messages.MeshStatus{}, time.Second).Result()
		return err == nil && res.(*messages.MeshStatusReply).Connected
	})
	resolve := func(pids MeshPIDs, ref string) (*messages.TopicResolved, time.Duration) {
		t.Helper()
		start := time.Now()
		res, err := root.RequestFuture(pids.Conn, &messages.ResolveTopic{Ref: ref}, 2*messages.NameTimeout).Result()
		if err != nil {
			t.Fatalf("resolve %s: %v", ref, err)
		}
		return res.(*messages.TopicResolved), time.Since(start)
	}
	if got, took := resolve(silent, "builds"); got.Err != nil || got.ID != "T-builds" || took < messages.NameTimeout {
		t.Fatalf("#builds from a silent broker: %+v after %v; want the kept id after %v", got, took, messages.NameTimeout)
	}
	got, _ := resolve(silent, "never")
	var me *messages.Error
	if !errors.As(got.Err, &me) || me.Status != http.StatusServiceUnavailable || me.Code != messages.CodeBrokerUnavailable ||
		!strings.Contains(me.Detail, "never seen") {
		t.Fatalf("#never from a silent broker: %+v; want 503 broker_unavailable, never seen", got)
	}
	if got, _ := resolve(silent, "T0123456789abcdefghij"); got.Err != nil || got.ID != "T0123456789abcdefghij" {
		t.Fatalf("an id from a silent broker: %+v; want it as it is", got)
	}
	res, err := root.RequestFuture(silent.Conn, &messages.KeptPeers{}, 5*time.Second).Result()
	if list, ok := res.(*messages.PeersList); err != nil || !ok || list.Err != nil || len(list.Peers) != 1 || list.Peers[0].Pubkey != bob.Pubkey ||
		list.Peers[0].DisplayName != "bob" {
		t.Fatalf("kept peers: %+v, %v", res, err)
	}

	away := attach("gone", "ws://127.0.0.1:1/ws") // nothing listens: never connected
	if got, took := resolve(away, "builds"); got.Err != nil || got.ID != "T-builds" || took >= messages.NameTimeout {
		t.Fatalf("#builds with no broker: %+v after %v; want the kept id at once", got, took)
	}
	res, err = root.RequestFuture(away.Conn, &messages.KeptPeers{}, 5*time.Second).Result()
	if list, ok := res.(*messages.PeersList); err != nil || !ok || list.Err == nil {
		t.Fatalf("kept peers of a route that kept none: %+v, %v; want an error", res, err)
	}
}
