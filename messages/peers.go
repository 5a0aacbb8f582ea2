package messages

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// MinPeerPrefix is the shortest pubkey prefix ResolvePeer accepts.
const MinPeerPrefix = 8

// PeerRoleMember is the peerRole of a peer-list entry for a member with no
// connection (member_directory feature); its status is PeerStatusOffline.
// PeerRoleSession is that of a connection with a session key of its own.
const (
	PeerRoleMember    = "member"
	PeerStatusOffline = "offline"
	PeerRoleSession   = "session"
)

// ChannelUpstreamCLI is the hello channel of the upstream CLI's own
// connections (its commands without a daemon): a member hello with a
// session key made for the process, listed as a control-plane peer by
// upstream's broker and as a session by ours, and for the broker's 90 s
// grace after the command ends.
const ChannelUpstreamCLI = "claude-code"

// NameKey is what two display names must not share within a mesh: the
// name under Unicode compatibility normalization (NFKC) and case folding,
// with invisible characters (controls, format characters such as
// zero-width joiners and bidi overrides, variation selectors) dropped and
// runs of spaces made one, then reduced to its UTS #39 confusable skeleton
// (so Cyrillic "а" and Latin "a", "0" and "O", "rn" and "m" fold
// together) and folded once more. "alice", "Alice", "ＡＬＩＣＥ", "аlice" and
// "a1ice" share one key. It is a comparison key, never shown. A name with
// nothing visible has the key "".
func NameKey(name string) string {
	fold := cases.Fold()
	s := norm.NFKC.String(fold.String(norm.NFKC.String(name)))
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case invisible(r):
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return norm.NFKC.String(fold.String(confusables.Skeleton(b.String())))
}

// ValidDisplayName reports whether name may be a display name: UTF-8
// with something visible, and no character NameKey drops (controls C0 and
// C1, format characters such as zero-width spaces and bidi overrides,
// variation selectors) nor a line or paragraph separator — characters that
// would let two names that read alike differ, or a name change what is
// printed after it.
func ValidDisplayName(name string) bool {
	return utf8.ValidString(name) && NameKey(name) != "" && !strings.ContainsFunc(name, func(r rune) bool {
		return invisible(r) || unicode.In(r, unicode.Zl, unicode.Zp)
	})
}

// invisible reports the characters NameKey drops: controls, format
// characters (Cf: zero-width spaces and joiners, bidi controls, the soft
// hyphen), variation selectors and the other default-ignorable ones.
func invisible(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
}

// ResolvePeer turns a display name or a unique pubkey prefix of at least
// MinPeerPrefix hex digits into the full pubkey of a peer (MatchPeers):
// two keys matching are an ambiguity, refused with the candidates' key
// prefixes, never a guess. mesh only names the mesh in errors (empty:
// peers of every mesh).
func ResolvePeer(to, mesh string, peers []Peer) (string, error) {
	found := MatchPeers(to, peers)
	where := "on mesh " + mesh
	if mesh == "" {
		where = "on any mesh"
	}
	switch len(found) {
	case 1:
		return strings.ToLower(found[0].Pubkey), nil
	case 0:
		return "", fmt.Errorf("no peer matches %q %s; %s", to, where, seenPeers(peers))
	}
	return "", fmt.Errorf("%q is ambiguous %s: it matches %s (names that look alike count as one); use the full pubkey", to, where, describePeers(found))
}

// MatchPeers is the peers, one per key, that `to` may name: those whose
// display name has its NameKey (case, width and look-alike letters do not
// tell names apart, so "alice" also finds an "аlice" with a Cyrillic а),
// or else, for MinPeerPrefix or more hex digits, those whose pubkey or
// member pubkey begins with them. The list is what the broker gives: the
// connected peers and, from a broker with the member_directory feature,
// the members not connected (PeerRole "member", status "offline"), so
// that a name still resolves to a member that is offline and the message
// queues for it. Unlike upstream, control-plane rows count: a member's
// daemon connects as one, and a DM to its member key is what reaches that
// daemon's inbox. Several presences of one key (a daemon and a cold-path
// CLI) are one match.
func MatchPeers(to string, peers []Peer) []Peer {
	match := func(ok func(p Peer) bool) []Peer {
		var out []Peer
		for _, p := range peers {
			if p.Pubkey != "" && ok(p) && !slices.ContainsFunc(out, func(q Peer) bool { return q.Pubkey == p.Pubkey }) {
				out = append(out, p)
			}
		}
		return out
	}
	var found []Peer
	if key := NameKey(to); key != "" {
		found = match(func(p Peer) bool { return NameKey(p.DisplayName) == key })
	}
	if len(found) == 0 && len(to) >= MinPeerPrefix && IsHex(to) {
		prefix := strings.ToLower(to)
		found = match(func(p Peer) bool {
			return strings.HasPrefix(strings.ToLower(p.Pubkey), prefix) || strings.HasPrefix(strings.ToLower(p.MemberPubkey), prefix)
		})
	}
	return found
}

// OneMember is the member key that the several peers a name matches
// (MatchPeers) all belong to, when none of them is an agent session and
// own does not claim the key: the connections of one member listed under
// one name — its daemon and the upstream CLI's connections of its
// commands, which stay listed for the broker's grace — are one recipient,
// and a DM to the member key reaches that member's live connections. An
// agent session (peerRole session, from a session_hello: ours or the
// upstream daemon's, not a CLI's connection) has an inbox of its own that
// a DM to its member's key does not reach, so a name two of them share
// stays ambiguous; own is the sender's own member key, whose other
// connections are not where a message should go. ok is false for fewer
// than two peers, and for peers of several members or of none known.
func OneMember(found []Peer, own func(key string) bool) (key string, ok bool) {
	if len(found) < 2 {
		return "", false
	}
	key = strings.ToLower(found[0].MemberPubkey)
	for _, p := range found {
		if key == "" || !strings.EqualFold(p.MemberPubkey, key) || p.PeerRole == PeerRoleSession && p.Channel != ChannelUpstreamCLI {
			return "", false
		}
	}
	if own(key) {
		return "", false
	}
	return key, true
}

// ResolveRecipient is ResolvePeer for where a message goes: a name that
// several peers of one member share (OneMember) names that member's key.
func ResolveRecipient(to, mesh string, peers []Peer, own func(key string) bool) (string, error) {
	if key, ok := OneMember(MatchPeers(to, peers), own); ok {
		return key, nil
	}
	return ResolvePeer(to, mesh, peers)
}

// seenPeers says which peers a name could have named, for the error of a
// name that names none.
func seenPeers(peers []Peer) string {
	usable := slices.DeleteFunc(slices.Clone(peers), func(p Peer) bool { return p.Pubkey == "" })
	if len(usable) == 0 {
		return "no peers are connected and the broker lists no offline members (use the 64-hex pubkey)"
	}
	return "peers seen: " + describePeers(usable)
}

func describePeers(peers []Peer) string {
	parts := make([]string, len(peers))
	for i, p := range peers {
		name := p.DisplayName
		if name == "" {
			name = "(unnamed)"
		}
		if p.PeerRole == PeerRoleMember {
			name += ", offline"
		}
		parts[i] = fmt.Sprintf("%s (%.16s…)", name, p.Pubkey)
	}
	return strings.Join(parts, ", ")
}
