package ipcserver

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
)

// PeerListMaxAge is how long a mesh's peer list, once asked of its broker
// connection, answers display names in POST /v1/send without asking again.
// A name the kept list does not give exactly once asks at once.
const PeerListMaxAge = 30 * time.Second

// peerDirectory keeps the peer list of each mesh (a membership's slug or a
// session's route) that a send by name needed or GET /v1/peers gave, so
// that a stream of sends to "bob" costs one broker round trip every
// PeerListMaxAge, not one each, a known name still resolves while the
// broker is away, and the answer to a DM can say that its recipient is
// busy (busy). The zero value is ready; the HTTP handlers share it, the
// store never sees it.
type peerDirectory struct {
	mu    sync.Mutex
	lists map[string]keptPeers
}

// keptPeers is a mesh's peer list and when its broker gave it.
type keptPeers struct {
	peers []messages.Peer
	at    time.Time
}

// resolve returns the peers `to` names on mesh (messages.MatchPeers) and
// the list they were matched in: the kept list when it is younger than
// PeerListMaxAge and names exactly one; else a list fetched now, kept for
// the next; else — fetch failing, the broker away — the kept list however
// old. With no list at all, fetch's error.
func (d *peerDirectory) resolve(mesh, to string, now time.Time, fetch func() ([]messages.Peer, error)) (list, found []messages.Peer, err error) {
	d.mu.Lock()
	kept, ok := d.lists[mesh]
	d.mu.Unlock()
	if ok && now.Sub(kept.at) < PeerListMaxAge {
		if found := messages.MatchPeers(to, kept.peers); len(found) == 1 {
			return kept.peers, found, nil
		}
	}
	fresh, err := fetch()
	switch {
	case err != nil && !ok:
		return nil, nil, err
	case err != nil:
		fresh = kept.peers
	default:
		d.keep(mesh, fresh, now)
	}
	return fresh, messages.MatchPeers(to, fresh), nil
}

// keep records mesh's peer list as its broker gave it at now.
func (d *peerDirectory) keep(mesh string, peers []messages.Peer, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lists == nil {
		d.lists = map[string]keptPeers{}
	}
	d.lists[mesh] = keptPeers{peers: peers, at: now}
}

// busy is the status of the peer key in mesh's kept list when that list
// is younger than PeerListMaxAge and shows it working or dnd; "" when it
// does not (idle, not listed, no list).
func (d *peerDirectory) busy(mesh, key string, now time.Time) string {
	d.mu.Lock()
	kept, ok := d.lists[mesh]
	d.mu.Unlock()
	if !ok || now.Sub(kept.at) >= PeerListMaxAge {
		return ""
	}
	for _, p := range kept.peers {
		if strings.EqualFold(p.Pubkey, key) && (p.Status == messages.StatusWorking || p.Status == messages.StatusDND) {
			return p.Status
		}
	}
	return ""
}

// resolveRecipient resolves a send whose `to` names a peer (a display name
// or a pubkey prefix) to the one key the peer list of mesh gives it, after
// phase A and before the accept, and sets the destination's targetSpec;
// the fingerprint keeps the `to` as typed. Several peers of one member
// other than this daemon's, none an agent session, are that member's key
// (messages.OneMember). No peer or several others is a refusal (404
// unknown_recipient, 409 ambiguous_recipient with the candidates), and
// nothing is stored. While the broker is away, or does not answer
// within messages.NameTimeout, the last list the daemon had answers: kept
// here, else the one the mesh's connection kept in outbox.db across
// reconnects and restarts (messages.KeptPeers). A name no such list gives
// is 503 broker_unavailable (messages.NeverSeen).
func (s *Server) resolveRecipient(mesh *Mesh, send *messages.Send) error {
	if !send.Destination.NamesPeer() {
		return nil
	}
	slug, to := mesh.Info.Mesh, send.Destination.Ref
	var away error // why the broker gave no list, when it gave none
	list, found, err := s.names.resolve(slug, to, s.opts.now(), func() ([]messages.Peer, error) {
		peers, err := s.askPeers(slug, &messages.ListPeers{}, messages.NameTimeout)
		away = err
		return peers, err
	})
	if err != nil {
		list, _ = s.askPeers(slug, &messages.KeptPeers{}, DefaultRequestTimeout)
		found = messages.MatchPeers(to, list)
	}
	key, oneMember := messages.OneMember(found, s.ownMember)
	switch {
	case away != nil && len(found) == 0:
		return messages.NeverSeen("peer", to, slug, away, "the 64-hex pubkey")
	case len(found) == 1:
		key = found[0].Pubkey
	case !oneMember:
		return messages.RecipientError(to, slug, list, found)
	}
	send.Destination.TargetSpec = strings.ToLower(key)
	return nil
}

// ownMember reports whether key is the member key of one of this
// daemon's memberships.
func (s *Server) ownMember(key string) bool {
	return slices.ContainsFunc(s.Memberships(), func(m Mesh) bool { return strings.EqualFold(m.Info.MemberPubkey, key) })
}

// askPeers asks the broker connection of the mesh slug names for a peer
// list: the broker's (*messages.ListPeers), or the one it kept
// (*messages.KeptPeers).
func (s *Server) askPeers(slug string, msg any, within time.Duration) ([]messages.Peer, error) {
	pid, err := s.meshActor(slug)
	if err != nil {
		return nil, err
	}
	list, err := askWithin[*messages.PeersList](s, pid, msg, within)
	switch {
	case errors.Is(err, actor.ErrTimeout):
		return nil, fmt.Errorf("no answer within %v", within)
	case err != nil:
		return nil, err
	}
	return list.Peers, nil
}
