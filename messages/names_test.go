package messages

import (
	"strings"
	"testing"
)

// TestNameKey: names that read the same share a key; others do not.
func TestNameKey(t *testing.T) {
	same := [][]string{
		{"alice", "Alice", "ALICE", "аlice" /* Cyrillic а */, "ａｌｉｃｅ", "a1ice", "al\u0131ce" /* dotless ı */, "ali\u200bce", " alice ", "alice\u202e"},
		{"bob smith", "bob  smith", "Bob\u00a0Smith"},
		{"m", "rn"},
		{"agent0", "agentO", "agento"},
		{"straße", "STRASSE"},
	}
	keys := map[string]string{}
	for _, group := range same {
		want := NameKey(group[0])
		if want == "" {
			t.Fatalf("NameKey(%q) is empty", group[0])
		}
		for _, name := range group[1:] {
			if got := NameKey(name); got != want {
				t.Errorf("NameKey(%+q) = %+q, want %+q (as %q)", name, got, want, group[0])
			}
		}
		if other, ok := keys[want]; ok {
			t.Errorf("%q and %q share key %q", group[0], other, want)
		}
		keys[want] = group[0]
	}
	for _, name := range []string{"", "   ", "\u200b\u200d", "\x1b"} {
		if k := NameKey(name); k != "" {
			t.Errorf("NameKey(%+q) = %+q, want empty", name, k)
		}
	}
	if NameKey("alice") == NameKey("alicia") || NameKey("bob") == NameKey("bobby") {
		t.Error("different names share a key")
	}
}

// TestResolvePeerLookalikes: a name finds look-alikes too, so an impostor
// beside the real member is an ambiguity listing both keys; a member
// listed offline (member_directory) resolves like a connected one.
func TestResolvePeerLookalikes(t *testing.T) {
	key := func(c byte) string { return strings.Repeat(string(c), 64) }
	alice := Peer{Pubkey: key('a'), MemberPubkey: key('a'), DisplayName: "alice", PeerRole: PeerRoleMember, Status: PeerStatusOffline}
	impostor := Peer{Pubkey: key('b'), MemberPubkey: key('b'), DisplayName: "аlice", PeerRole: "control-plane"}
	if got, err := ResolvePeer("Alice", "m", []Peer{alice}); err != nil || got != key('a') {
		t.Errorf("an offline member by name: %q, %v", got, err)
	}
	_, err := ResolvePeer("alice", "m", []Peer{impostor, alice})
	if err == nil || !strings.Contains(err.Error(), "ambiguous") || !strings.Contains(err.Error(), key('a')[:16]) ||
		!strings.Contains(err.Error(), key('b')[:16]) || !strings.Contains(err.Error(), "offline") {
		t.Errorf("alice beside аlice: %v; want an ambiguity naming both key prefixes", err)
	}
}
