package messages

import (
	"strings"
	"testing"
)

func TestResolvePeer(t *testing.T) {
	key := func(c byte) string { return strings.Repeat(string(c), 64) }
	peers := []Peer{
		{Pubkey: key('a'), MemberPubkey: key('a'), DisplayName: "Alice"},
		{Pubkey: key('a'), MemberPubkey: key('a'), DisplayName: "Alice"}, // a second presence of one key
		{Pubkey: "abcdef12" + key('1')[8:], MemberPubkey: key('9'), DisplayName: "bob"},
		{Pubkey: "abcdef12" + key('2')[8:], DisplayName: "carol"},
		{DisplayName: "no key"},
	}
	for _, c := range []struct {
		to, want, err string
	}{
		{to: "alice", want: key('a')},                      // names match case-insensitively; presences of one key are one match
		{to: "BOB", want: "abcdef12" + key('1')[8:]},       // the session key is what a DM goes to
		{to: "99999999", want: "abcdef12" + key('1')[8:]},  // a prefix of the member key
		{to: "ABCDEF121", want: "abcdef12" + key('1')[8:]}, // prefixes ignore case
		{to: "abcdef12", err: "is ambiguous on mesh m: it matches bob"},
		{to: "abcdef1", err: "no peer matches"}, // shorter than MinPeerPrefix
		{to: "dave", err: "no peer matches \"dave\" on mesh m; peers seen: Alice"},
	} {
		got, err := ResolvePeer(c.to, "m", peers)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ResolvePeer(%q) = %q, %v; want an error containing %q", c.to, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ResolvePeer(%q) = %q, %v; want %q", c.to, got, err, c.want)
		}
	}
	if _, err := ResolvePeer("alice", "m", []Peer{{DisplayName: "alice"}}); err == nil || !strings.Contains(err.Error(), "no peers are connected") {
		t.Errorf("with no usable peer: %v", err)
	}
}
