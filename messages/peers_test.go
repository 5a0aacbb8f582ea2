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

// TestOneMember: several peers a name matches are one recipient, their
// member's key, when they all belong to one member other than the
// sender's and none is an agent session; the upstream CLI's connections
// count as that member's whichever role the broker lists them under.
func TestOneMember(t *testing.T) {
	key := func(c byte) string { return strings.Repeat(string(c), 64) }
	cli := func(session byte, member string) Peer {
		return Peer{Pubkey: key(session), MemberPubkey: member, PeerRole: "control-plane", Channel: ChannelUpstreamCLI}
	}
	listedAsSession := cli('2', key('c')) // our broker lists a hello with a session key as a session
	listedAsSession.PeerRole = PeerRoleSession
	agent := Peer{Pubkey: key('3'), MemberPubkey: key('c'), PeerRole: PeerRoleSession, Channel: "claudemesh-session"}
	daemon := Peer{Pubkey: key('c'), MemberPubkey: key('c'), PeerRole: "control-plane", Channel: ChannelDaemon}
	notMine := func(string) bool { return false }
	for _, c := range []struct {
		name  string
		found []Peer
		own   func(string) bool
		want  string
	}{
		{"two CLI connections of one member", []Peer{cli('1', key('c')), cli('2', key('C'))}, notMine, key('c')},
		{"the member's daemon and its CLI's", []Peer{daemon, listedAsSession}, notMine, key('c')},
		{"one peer", []Peer{cli('1', key('c'))}, notMine, ""},
		{"two members", []Peer{cli('1', key('c')), cli('2', key('d'))}, notMine, ""},
		{"no member key known", []Peer{cli('1', ""), cli('2', "")}, notMine, ""},
		{"an agent session among them", []Peer{cli('1', key('c')), agent}, notMine, ""},
		{"the sender's own member", []Peer{cli('1', key('c')), cli('2', key('c'))}, func(k string) bool { return k == key('c') }, ""},
	} {
		got, ok := OneMember(c.found, c.own)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("%s: %q %v, want %q", c.name, got, ok, c.want)
		}
	}
	twins := []Peer{cli('1', key('c')), cli('2', key('c'))}
	twins[0].DisplayName, twins[1].DisplayName = "twin", "Twin"
	if got, err := ResolveRecipient("twin", "m", twins, notMine); err != nil || got != key('c') {
		t.Errorf("ResolveRecipient(twin) = %q, %v; want the member key", got, err)
	}
	if _, err := ResolveRecipient("twin", "m", twins, func(string) bool { return true }); err == nil || !strings.Contains(err.Error(), "is ambiguous") {
		t.Errorf("ResolveRecipient(twin) of the sender's own member: %v, want ambiguous", err)
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
