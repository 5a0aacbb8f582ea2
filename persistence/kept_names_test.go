package persistence

import (
	"context"
	"maps"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestKeptNames: a route's peer names and topic names are kept apart,
// each replaced by the next list of its kind, read back after the file is
// opened again (a daemon restart), and forgotten with the route; another
// route's are its own.
func TestKeptNames(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outbox.db")
	o, err := OpenOutbox(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { o.Close() }()
	keep := func(m messages.KeepNames) {
		t.Helper()
		if err := run(t, o.DB, func(tx *Tx) error { return o.KeepNames(tx, &m) }); err != nil {
			t.Fatal(err)
		}
	}
	read := func(route string) *messages.KeptNames {
		t.Helper()
		var kept *messages.KeptNames
		if err := run(t, o.DB, func(tx *Tx) (err error) { kept, err = o.KeptNames(tx, route); return err }); err != nil {
			t.Fatal(err)
		}
		return kept
	}
	bob := messages.Peer{DisplayName: "bob", Pubkey: "b0b", MemberPubkey: "m0b", PeerRole: messages.PeerRoleMember}
	ann := messages.Peer{DisplayName: "ann", Pubkey: "a00", MemberPubkey: "a00"}
	if kept := read("demo"); kept.Peers != nil || kept.Topics != nil {
		t.Fatalf("names of a route never kept: %+v", kept)
	}
	keep(messages.KeepNames{Route: "demo", Kind: messages.KeptPeerNames, Peers: []messages.Peer{bob, ann}, Now: 1})
	keep(messages.KeepNames{Route: "demo", Kind: messages.KeptTopicNames, Topics: map[string]string{"builds": "T1", "dev": "T2"}, Now: 1})
	keep(messages.KeepNames{Route: "demo/s1", Kind: messages.KeptTopicNames, Topics: map[string]string{}, Now: 1})
	keep(messages.KeepNames{Route: "demo", Kind: messages.KeptPeerNames, Peers: []messages.Peer{bob}, Now: 2})
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if o, err = OpenOutbox(ctx, path); err != nil {
		t.Fatal(err)
	}
	kept := read("demo")
	if len(kept.Peers) != 1 || !reflect.DeepEqual(kept.Peers[0], bob) || !maps.Equal(kept.Topics, map[string]string{"builds": "T1", "dev": "T2"}) {
		t.Fatalf("demo's names after a reopen: %+v", kept)
	}
	if s1 := read("demo/s1"); s1.Peers != nil || s1.Topics == nil || len(s1.Topics) != 0 {
		t.Fatalf("a session's names: %+v, want no peer list and an empty topic list", s1)
	}
	if err := run(t, o.DB, func(tx *Tx) error { return o.ForgetNames(tx, "demo/s1") }); err != nil {
		t.Fatal(err)
	}
	if s1 := read("demo/s1"); s1.Peers != nil || s1.Topics != nil {
		t.Fatalf("a forgotten route's names: %+v", s1)
	}
	if kept := read("demo"); len(kept.Peers) != 1 || len(kept.Topics) != 2 {
		t.Fatalf("forgetting demo/s1 changed demo's names: %+v", kept)
	}
}
