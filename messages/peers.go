package messages

import (
	"fmt"
	"slices"
	"strings"
)

// MinPeerPrefix is the shortest pubkey prefix ResolvePeer accepts.
const MinPeerPrefix = 8

// ResolvePeer turns a display name (case-insensitive) or a unique pubkey
// prefix of at least MinPeerPrefix hex digits into the full pubkey of a
// connected peer. Unlike upstream, control-plane rows count: a member's
// daemon connects as one, and a DM to its member key is what reaches that
// daemon's inbox. Several presences of one key (a daemon and a cold-path
// CLI) are one match. mesh only names the mesh in errors.
func ResolvePeer(to, mesh string, peers []Peer) (string, error) {
	var usable []Peer
	for _, p := range peers {
		if p.Pubkey != "" {
			usable = append(usable, p)
		}
	}
	match := func(ok func(p Peer) bool) []Peer {
		var out []Peer
		for _, p := range usable {
			if ok(p) && !slices.ContainsFunc(out, func(q Peer) bool { return q.Pubkey == p.Pubkey }) {
				out = append(out, p)
			}
		}
		return out
	}
	found := match(func(p Peer) bool { return strings.EqualFold(p.DisplayName, to) })
	if len(found) == 0 && len(to) >= MinPeerPrefix && IsHex(to) {
		prefix := strings.ToLower(to)
		found = match(func(p Peer) bool {
			return strings.HasPrefix(strings.ToLower(p.Pubkey), prefix) || strings.HasPrefix(strings.ToLower(p.MemberPubkey), prefix)
		})
	}
	switch len(found) {
	case 1:
		return strings.ToLower(found[0].Pubkey), nil
	case 0:
		if len(usable) == 0 {
			return "", fmt.Errorf("no peer matches %q on mesh %s: no peers are connected (a display name resolves only while its peer is online; use the 64-hex pubkey)", to, mesh)
		}
		return "", fmt.Errorf("no peer matches %q on mesh %s; peers seen: %s", to, mesh, describePeers(usable))
	}
	return "", fmt.Errorf("%q is ambiguous on mesh %s: it matches %s; use the full pubkey", to, mesh, describePeers(found))
}

func describePeers(peers []Peer) string {
	parts := make([]string, len(peers))
	for i, p := range peers {
		name := p.DisplayName
		if name == "" {
			name = "(unnamed)"
		}
		parts[i] = fmt.Sprintf("%s (%.16s…)", name, p.Pubkey)
	}
	return strings.Join(parts, ", ")
}
