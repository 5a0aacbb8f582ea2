package actors

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
)

// The names a mesh's broker link gave last: the peer list's display names
// and keys, and the topics' names and ids, for this connection's route (a
// session's are its own view). The relay reads what outbox.db kept for
// the route as the connection starts (messages.ReadKeptNames); the peers
// and topics relays hand it every list that arrives, and one that changes
// what it keeps is written back (messages.KeepNames), so the names outlive
// the link and the daemon. A send to a display name or a `#name` resolves
// from them while the broker is away or does not answer in time
// (messages.NameTimeout): the IPC asks for the kept peer list
// (messages.KeptPeers), the topics relay looks a `#name` up here. What
// needs them before the store has answered waits for its answer.
type namesRelay struct {
	b       *BrokerConn
	loaded  bool
	waiting []func(actor.Context) // until the store's answer
	peers   []messages.Peer       // the last peer list's names; nil: none ever
	topics  map[string]string     // topic name → id; nil: no topic list ever
}

// errNoPeerList answers messages.KeptPeers on a route whose broker never
// gave a peer list.
var errNoPeerList = errors.New("no peer list was ever kept")

func (r *namesRelay) routes() relayRoutes {
	return relayRoutes{
		messages: []route{on(r.read), on(r.keptPeers)},
		start:    r.start,
	}
}

// start asks the store for the names the route kept.
func (r *namesRelay) start(ctx actor.Context) {
	ctx.Request(r.b.store, &messages.ReadKeptNames{Route: r.b.cfg.Slug})
}

// read takes the store's answer and runs what waited for it. Names
// unreadable are none: a name is then refused until the broker lists it.
func (r *namesRelay) read(ctx actor.Context, m *messages.KeptNames) {
	if m.Err != nil {
		r.b.log.Warn("kept_names_unreadable", "err", m.Err)
	}
	r.peers, r.topics, r.loaded = m.Peers, m.Topics, true
	waiting := r.waiting
	r.waiting = nil
	for _, fn := range waiting {
		fn(ctx)
	}
}

// then runs fn once the kept names are read: now, or at the store's
// answer.
func (r *namesRelay) then(ctx actor.Context, fn func(actor.Context)) {
	if r.loaded {
		fn(ctx)
		return
	}
	r.waiting = append(r.waiting, fn)
}

// keptPeers answers the last peer list kept.
func (r *namesRelay) keptPeers(ctx actor.Context, _ *messages.KeptPeers) {
	who := ctx.Sender()
	r.then(ctx, func(ctx actor.Context) {
		out := &messages.PeersList{Mesh: r.b.cfg.Slug, Peers: r.peers}
		if r.peers == nil {
			out.Err = errNoPeerList
		}
		ctx.Send(who, out)
	})
}

// keepPeers keeps the names of a peer list the broker gave, written to
// the store when they differ from those kept.
func (r *namesRelay) keepPeers(ctx actor.Context, list []messages.Peer) {
	peers := peerNames(list)
	r.then(ctx, func(ctx actor.Context) {
		if r.peers != nil && slices.EqualFunc(r.peers, peers, func(a, b messages.Peer) bool { return comparePeerNames(a, b) == 0 }) {
			return
		}
		r.peers = peers
		ctx.Send(r.b.store, &messages.KeepNames{Route: r.b.cfg.Slug, Kind: messages.KeptPeerNames, Peers: peers, Now: time.Now().UnixMilli()})
	})
}

// keepTopics keeps topics (name → id): the whole topic list, or topics
// added to it (a creation). Written to the store when that changes what
// is kept. The kept map is replaced, never changed in place: the store
// may still be reading the one it was sent.
func (r *namesRelay) keepTopics(ctx actor.Context, topics map[string]string, whole bool) {
	given := maps.Clone(topics)
	r.then(ctx, func(ctx actor.Context) {
		next := given
		if !whole {
			next = maps.Clone(r.topics)
			if next == nil {
				next = map[string]string{}
			}
			maps.Copy(next, given)
		}
		if r.topics != nil && maps.Equal(r.topics, next) {
			return
		}
		r.topics = next
		ctx.Send(r.b.store, &messages.KeepNames{Route: r.b.cfg.Slug, Kind: messages.KeptTopicNames, Topics: next, Now: time.Now().UnixMilli()})
	})
}

// topicID is the kept id of the topic named name.
func (r *namesRelay) topicID(name string) (string, bool) {
	id, ok := r.topics[name]
	return id, ok
}

// peerNames is what is kept of a peer list: each peer's display name,
// keys and role, one entry per key and name, sorted.
func peerNames(list []messages.Peer) []messages.Peer {
	out := make([]messages.Peer, 0, len(list))
	for _, p := range list {
		if p.Pubkey != "" {
			out = append(out, messages.Peer{DisplayName: p.DisplayName, Pubkey: p.Pubkey, MemberPubkey: p.MemberPubkey, PeerRole: p.PeerRole})
		}
	}
	slices.SortFunc(out, comparePeerNames)
	return slices.CompactFunc(out, func(a, b messages.Peer) bool { return comparePeerNames(a, b) == 0 })
}

// comparePeerNames orders kept peers by key, name, member key and role.
func comparePeerNames(a, b messages.Peer) int {
	return cmp.Or(strings.Compare(a.Pubkey, b.Pubkey), strings.Compare(a.DisplayName, b.DisplayName),
		strings.Compare(a.MemberPubkey, b.MemberPubkey), strings.Compare(a.PeerRole, b.PeerRole))
}
