package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
)

// The peer list and the profile on a mesh's broker link: GET /v1/peers
// relayed as list_peers, correlated by _reqId, and POST /v1/profile as one
// frame per field group (set_status, set_summary, set_visible,
// set_profile), which the broker does not answer: the profile is applied
// once its frames are written. Every peer list's names are kept (kept).
type peersRelay struct {
	b     *BrokerConn
	kept  *namesRelay
	calls asks[*messages.ListPeers] // list_peers in flight
}

// peersIDs prefixes the _reqId of a list_peers.
const peersIDs = "pl"

func (r *peersRelay) routes() relayRoutes {
	return relayRoutes{ids: peersIDs,
		messages: []route{on(r.list), on(r.setProfile)},
		frames:   []route{on(r.listed)},
		down:     r.down,
	}
}

func (r *peersRelay) list(ctx actor.Context, m *messages.ListPeers) {
	id := r.calls.ask(peersIDs, ctx.Sender(), m)
	if err := r.b.send(&messages.ListPeersFrame{Type: messages.TypeListPeers, ReqID: id}); err != nil {
		r.calls.take(id)
		ctx.Respond(&messages.PeersList{Mesh: r.b.cfg.Slug, Err: err})
	}
}

func (r *peersRelay) listed(ctx actor.Context, f *messages.PeersListFrame) {
	r.calls.answer(ctx, f.ReqID, &messages.PeersList{Mesh: r.b.cfg.Slug, Peers: f.Peers})
	r.kept.keepPeers(ctx, f.Peers)
}

// down fails every list in flight: the connection is gone.
func (r *peersRelay) down(ctx actor.Context) {
	r.calls.answerAll(ctx, func() any { return &messages.PeersList{Mesh: r.b.cfg.Slug, Err: ErrNotConnected} })
}

// setProfile sends one frame per field group, as the protocol has them.
func (r *peersRelay) setProfile(ctx actor.Context, p *messages.SetProfile) {
	var frames []any
	var applied []string
	if p.Status != nil {
		frames, applied = append(frames, &messages.SetStatusFrame{Type: messages.TypeSetStatus, Status: *p.Status}), append(applied, "status")
	}
	if p.Summary != nil {
		frames, applied = append(frames, &messages.SetSummaryFrame{Type: messages.TypeSetSummary, Summary: *p.Summary}), append(applied, "summary")
	}
	if p.Visible != nil {
		frames, applied = append(frames, &messages.SetVisibleFrame{Type: messages.TypeSetVisible, Visible: *p.Visible}), append(applied, "visible")
	}
	if p.Avatar != nil || p.Title != nil || p.Bio != nil || p.Capabilities != nil {
		frames = append(frames, &messages.SetProfileFrame{Type: messages.TypeSetProfile, Avatar: p.Avatar, Title: p.Title, Bio: p.Bio,
			Capabilities: p.Capabilities})
		for name, set := range map[string]bool{"avatar": p.Avatar != nil, "title": p.Title != nil, "bio": p.Bio != nil,
			"capabilities": p.Capabilities != nil} {
			if set {
				applied = append(applied, name)
			}
		}
	}
	for _, f := range frames {
		if err := r.b.send(f); err != nil {
			ctx.Respond(&messages.ProfileApplied{Err: err})
			return
		}
	}
	ctx.Respond(&messages.ProfileApplied{Applied: applied, Meshes: []string{r.b.cfg.Slug}})
}
