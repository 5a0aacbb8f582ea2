package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/transport/wsserver"
)

// PresenceGrace is how long a dropped connection still counts as present: a
// reconnect within it is silent, after it peers get peer_left.
const PresenceGrace = 90 * time.Second

// presence is one connection as the hub sees it.
type presence struct {
	connID        string
	pid           *actor.PID
	link          *wsserver.Conn
	meshID        string
	member        *broker.Member
	sessionPubkey string // "" for a member (control-plane) connection
	sessionID     string
	groups        []messages.Group
	connectedAt   time.Time
	hostname      string
	peerType      string
	channel       string
	cwd           string
	offline       bool // dropped, within the grace period
}

// pubkey is the key peers see: the session key, else the member key.
func (p *presence) pubkey() string {
	if p.sessionPubkey != "" {
		return p.sessionPubkey
	}
	return p.member.Pubkey
}

func (p *presence) role() string {
	if p.sessionPubkey != "" {
		return "session"
	}
	return "control-plane"
}

func (p *presence) inGroup(name string) bool {
	for _, g := range p.groups {
		if g.Name == name || strings.HasPrefix(g.Name, name+"/") {
			return true
		}
	}
	return false
}

// Hub messages.
type (
	// hubRegister adds a connection after its hello; no reply.
	hubRegister struct{ p *presence }
	// hubUnregister marks a connection dropped; peer_left follows after the grace.
	hubUnregister struct{ connID string }
	hubGraceOver  struct{ connID string }
	// hubResolve asks for a send's recipients; the reply is *hubResolved.
	hubResolve struct {
		meshID, senderConn, senderMember, targetSpec, priority string
	}
	hubResolved struct {
		kind, ref  string
		recipients []string // member pubkeys that get a delivery row
		online     []string // of those, the ones pushed to right after the commit
	}
	// hubFanout pushes an encoded frame to the live connections of members.
	// A member left with none (its connection closed after the send was
	// resolved) has a row leased for a push that cannot happen: the
	// sweeper is told to release it (releaseLeases).
	hubFanout struct {
		meshID, senderConn string
		members            []string
		frame              []byte
	}
	// hubSweeper tells the hub where the sweeper is (it starts after the
	// hub, which it needs); sent once, before any fanout.
	hubSweeper struct{ pid *actor.PID }
	// hubListPeers asks for the peer list; the reply is *messages.PeersListFrame.
	hubListPeers struct{ meshID, requesterMember string }
	// hubMemberChanged replaces the hub's copy of a member (profile change).
	hubMemberChanged struct{ member *broker.Member }
	// hubRedeliver tells the connections of these recipients (or, with
	// all, every live connection) to drain.
	hubRedeliver struct {
		recipients []broker.Recipient
		all        bool
	}
	// hubRevoked: these members were revoked; their connections are closed
	// and they leave the peer lists.
	hubRevoked struct{ members []broker.Recipient }
	// hubStats asks for connection counts; the reply is *hubStatsReply.
	hubStats      struct{}
	hubStatsReply struct{ Connections, Meshes int }
)

// drain tells a connection to claim and push its queued deliveries.
type drain struct{}

type hub struct {
	store    *broker.Store
	metrics  *metrics
	log      *slog.Logger
	conns    map[string]*presence            // connID → presence
	byMesh   map[string]map[string]*presence // meshID → connID → presence
	members  map[string]map[string]*broker.Member
	graceFor time.Duration
	sweeper  *actor.PID // hubSweeper
}

func newHub(store *broker.Store, m *metrics, grace time.Duration, log *slog.Logger) actor.Producer {
	return func() actor.Actor {
		return &hub{store: store, metrics: m, log: log.With("actor", "hub"), conns: map[string]*presence{},
			byMesh: map[string]map[string]*presence{}, members: map[string]map[string]*broker.Member{}, graceFor: grace}
	}
}

func (h *hub) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	case *hubRegister:
		h.register(ctx, m.p)
	case *hubUnregister:
		h.unregister(ctx, m.connID)
	case *hubGraceOver:
		h.graceOver(m.connID)
	case *hubResolve:
		ctx.Respond(h.resolve(m))
	case *hubFanout:
		h.fanout(ctx, m)
	case *hubSweeper:
		h.sweeper = m.pid
	case *hubListPeers:
		ctx.Respond(h.peers(m))
	case *hubMemberChanged:
		h.memberChanged(m.member)
	case *hubRedeliver:
		h.redeliver(ctx, m)
	case *hubRevoked:
		h.revoked(ctx, m)
	case *hubStats:
		ctx.Respond(&hubStatsReply{Connections: len(h.conns), Meshes: len(h.byMesh)})
	default:
		h.log.Warn("unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

func (h *hub) register(ctx actor.Context, p *presence) {
	mesh := h.byMesh[p.meshID]
	if mesh == nil {
		mesh = map[string]*presence{}
		h.byMesh[p.meshID] = mesh
	}
	h.memberChanged(p.member)
	reattached := false
	for id, old := range mesh {
		same := old.member.Pubkey == p.member.Pubkey && old.sessionID == p.sessionID && old.sessionPubkey == p.sessionPubkey
		if !same {
			continue
		}
		if !old.offline {
			old.link.Close(1000, "session_replaced")
		}
		reattached = true
		delete(mesh, id)
		delete(h.conns, id)
	}
	mesh[p.connID] = p
	h.conns[p.connID] = p
	if !reattached {
		h.system(p, "peer_joined")
	}
}

func (h *hub) unregister(ctx actor.Context, connID string) {
	p := h.conns[connID]
	if p == nil {
		return
	}
	p.offline = true
	workers.SendLater(ctx, h.graceFor, &hubGraceOver{connID: connID})
}

func (h *hub) graceOver(connID string) {
	p := h.conns[connID]
	if p == nil || !p.offline {
		return // replaced by a reattach
	}
	h.remove(connID, p)
}

// remove takes a presence out of the peer lists and tells the mesh it left.
func (h *hub) remove(connID string, p *presence) {
	delete(h.conns, connID)
	delete(h.byMesh[p.meshID], connID)
	if len(h.byMesh[p.meshID]) == 0 {
		delete(h.byMesh, p.meshID)
	}
	h.system(p, "peer_left")
}

// system pushes a presence event about p to the live connections of the
// other members of its mesh.
func (h *hub) system(p *presence, event string) {
	data, _ := json.Marshal(map[string]any{"name": p.member.DisplayName, "pubkey": p.pubkey(), "groups": p.groups})
	frame, err := json.Marshal(&messages.PushFrame{Type: messages.TypePush, MessageID: ulid.Make().String(), MeshID: p.meshID,
		SenderPubkey: "system", Priority: "low", CreatedAt: time.Now().UTC().Format(time.RFC3339Nano),
		Subtype: "system", Event: event, EventData: data})
	if err != nil {
		return
	}
	for _, q := range h.byMesh[p.meshID] {
		if !q.offline && q.member.Pubkey != p.member.Pubkey {
			q.link.Send(frame)
		}
	}
}

// meshMembers returns the active members of a mesh, loaded on first use and
// reloaded when a member the hub does not know connects.
func (h *hub) meshMembers(meshID string) map[string]*broker.Member {
	if m, ok := h.members[meshID]; ok {
		return m
	}
	list, err := h.store.Members(context.Background(), meshID)
	if err != nil {
		h.log.Error("load members", "mesh", meshID, "err", err)
		return map[string]*broker.Member{}
	}
	m := make(map[string]*broker.Member, len(list))
	for i := range list {
		m[list[i].Pubkey] = &list[i]
	}
	h.members[meshID] = m
	return m
}

func (h *hub) memberChanged(member *broker.Member) {
	m := h.meshMembers(member.MeshID)
	if member.Revoked() {
		delete(m, member.Pubkey)
	} else {
		m[member.Pubkey] = member
	}
	for _, p := range h.byMesh[member.MeshID] {
		if p.member.Pubkey == member.Pubkey {
			p.member = member
		}
	}
}

func (h *hub) resolve(q *hubResolve) *hubResolved {
	members := h.meshMembers(q.meshID)
	t := q.targetSpec
	r := &hubResolved{kind: messages.KindTopic, ref: t}
	switch {
	case t == "*" || t == "@all":
		r.recipients = h.allBut(members, q.senderMember)
	case strings.HasPrefix(t, "#"):
		r.ref = t[1:]
		r.recipients = h.allBut(members, q.senderMember)
	case strings.HasPrefix(t, "@"):
		r.recipients = h.groupMembers(q.meshID, t[1:], q.senderMember)
	default:
		r.kind, r.recipients = messages.KindDM, []string{h.memberOf(q.meshID, t)}
	}
	for _, pk := range r.recipients {
		if h.pushable(q.meshID, pk, q.priority) {
			r.online = append(r.online, pk)
		}
	}
	return r
}

func (h *hub) allBut(members map[string]*broker.Member, sender string) []string {
	out := make([]string, 0, len(members))
	for pk := range members {
		if pk != sender {
			out = append(out, pk)
		}
	}
	slices.Sort(out)
	return out
}

func (h *hub) groupMembers(meshID, group, sender string) []string {
	var out []string
	for _, p := range h.byMesh[meshID] {
		if !p.offline && p.member.Pubkey != sender && p.inGroup(group) && !slices.Contains(out, p.member.Pubkey) {
			out = append(out, p.member.Pubkey)
		}
	}
	slices.Sort(out)
	return out
}

// memberOf maps a session pubkey of a live connection to its member; any
// other key is returned as it is.
func (h *hub) memberOf(meshID, pubkey string) string {
	for _, p := range h.byMesh[meshID] {
		if p.sessionPubkey == pubkey {
			return p.member.Pubkey
		}
	}
	return pubkey
}

// pushable reports whether member has a live connection that takes a
// message of this priority now (working and dnd take only "now").
func (h *hub) pushable(meshID, member, priority string) bool {
	for _, p := range h.byMesh[meshID] {
		if !p.offline && p.member.Pubkey == member && (priority == "now" || p.member.Status == broker.StatusIdle) {
			return true
		}
	}
	return false
}

func (h *hub) fanout(ctx actor.Context, f *hubFanout) {
	var pushed []string
	for _, p := range h.byMesh[f.meshID] {
		if !p.offline && p.connID != f.senderConn && slices.Contains(f.members, p.member.Pubkey) {
			p.link.Send(f.frame)
			h.metrics.pushes.Inc()
			pushed = append(pushed, p.member.Pubkey)
		}
	}
	var missed []string
	for _, m := range f.members {
		if !slices.Contains(pushed, m) {
			missed = append(missed, m)
		}
	}
	if len(missed) > 0 {
		ctx.Send(h.sweeper, &releaseLeases{meshID: f.meshID, keys: missed})
	}
}

func (h *hub) peers(q *hubListPeers) *messages.PeersListFrame {
	out := &messages.PeersListFrame{Type: messages.TypePeersList, Peers: []messages.Peer{}}
	for _, p := range h.byMesh[q.meshID] {
		m := p.member
		if !m.Visible && m.Pubkey != q.requesterMember {
			continue
		}
		out.Peers = append(out.Peers, messages.Peer{Pubkey: p.pubkey(), MemberPubkey: m.Pubkey, DisplayName: m.DisplayName,
			Status: m.Status, Summary: m.Summary, Groups: p.groups, SessionID: p.sessionID,
			ConnectedAt: p.connectedAt.UTC().Format(time.RFC3339Nano), Cwd: p.cwd, PeerRole: p.role(), Hostname: p.hostname,
			PeerType: p.peerType, Channel: p.channel, Visible: m.Visible, Avatar: m.Avatar, Title: m.Title, Bio: m.Bio,
			Capabilities: m.Capabilities})
	}
	slices.SortFunc(out.Peers, func(a, b messages.Peer) int { return strings.Compare(a.ConnectedAt+a.Pubkey, b.ConnectedAt+b.Pubkey) })
	return out
}

// revoked closes the live connections of revoked members (their conn
// actors answer with the revoked error and close 4002), removes their
// presences without the grace (peer_left at once) and drops them from the
// cached member lists, so that they resolve as no one's recipient.
func (h *hub) revoked(ctx actor.Context, m *hubRevoked) {
	for _, r := range m.members {
		delete(h.members[r.MeshID], r.Pubkey) // a mesh not cached here loads without it
		for id, p := range h.byMesh[r.MeshID] {
			if p.member.Pubkey != r.Pubkey {
				continue
			}
			if !p.offline {
				h.log.Info("member_revoked_disconnected", "mesh_id", r.MeshID, "pubkey", r.Pubkey, "conn", id)
				ctx.Send(p.pid, &revokedNow{})
			}
			h.remove(id, p) // no grace: it leaves the peer lists now
		}
	}
}

func (h *hub) redeliver(ctx actor.Context, m *hubRedeliver) {
	if m.all {
		for _, p := range h.conns {
			if !p.offline {
				ctx.Send(p.pid, &drain{})
			}
		}
		return
	}
	for _, r := range m.recipients {
		for _, p := range h.byMesh[r.MeshID] {
			if !p.offline && (p.member.Pubkey == r.Pubkey || p.sessionPubkey == r.Pubkey) {
				ctx.Send(p.pid, &drain{})
			}
		}
	}
}
