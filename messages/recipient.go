package messages

import (
	"fmt"
	"net/http"
	"strings"
)

// Codes of a POST /v1/send whose `to` names a peer that the mesh's peer
// list does not give exactly once. Nothing is stored and the
// client_message_id stays free.
const (
	// CodeUnknownRecipient (404): no peer has the name (or the prefix).
	CodeUnknownRecipient = "unknown_recipient"
	// CodeAmbiguousRecipient (409): several keys do; the answer lists them
	// in candidates.
	CodeAmbiguousRecipient = "ambiguous_recipient"
)

// MaxPeerNameBytes is the longest `to` taken for a peer's name: the
// broker's limit on a member's display name.
const MaxPeerNameBytes = 128

// PeerCandidate is one of the peers an ambiguous name matches, as the 409
// lists it: the key to send to instead, and the name it goes by.
type PeerCandidate struct {
	Pubkey      string `json:"pubkey"`
	DisplayName string `json:"display_name"`
}

// namesPeer reports whether `to` may name a peer for the daemon to resolve
// (ParseDestination took it for nothing else): a display name or a pubkey
// prefix, with something visible in it, at most MaxPeerNameBytes. A `to`
// that starts like a topic or a group is never a name.
func namesPeer(to string) bool {
	return to != "" && to[0] != '#' && to[0] != '@' && len(to) <= MaxPeerNameBytes && NameKey(to) != ""
}

// RecipientError is the refusal of a `to` that names no peer, or more than
// one key, in peers (MatchPeers's found) on mesh.
func RecipientError(to, mesh string, peers, found []Peer) *Error {
	if len(found) == 0 {
		return &Error{Status: http.StatusNotFound, Code: CodeUnknownRecipient,
			Detail: fmt.Sprintf("no peer of mesh %s is named %q (nor has a key starting so); %s; see `claudemesh peers`",
				mesh, to, seenPeers(peers))}
	}
	e := &Error{Status: http.StatusConflict, Code: CodeAmbiguousRecipient,
		Detail: fmt.Sprintf("%q names %d peers of mesh %s (names that look alike count as one): %s; send to one of their pubkeys",
			to, len(found), mesh, describePeers(found))}
	for _, p := range found {
		e.Candidates = append(e.Candidates, PeerCandidate{Pubkey: strings.ToLower(p.Pubkey), DisplayName: p.DisplayName})
	}
	return e
}
