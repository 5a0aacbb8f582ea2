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

// TestValidDisplayName: a display name is visible text; a character that
// hides or reorders what is printed, or that NameKey would drop, is
// refused.
func TestValidDisplayName(t *testing.T) {
	for name, want := range map[string]bool{
		"planner": true, "sess-а": true, "ＳＥＳＳ": true, "code review": true, "é": true,
		"": false, "   ": false, "sess\u202eA": false, "sess\u2067A": false, "sess\u200bA": false, "sess\u0085A": false,
		"a\tb": false, "a\x7fb": false, "a\u2028b": false, "\xff": false, "a\ufe0fb": false,
	} {
		if got := ValidDisplayName(name); got != want {
			t.Errorf("ValidDisplayName(%q) = %v, want %v", name, got, want)
		}
	}
	if got := SessionNameBase("/home/u/\u202eproj\u200b"); got != "proj" {
		t.Errorf("SessionNameBase drops what a name may not hold: %q", got)
	}
}
