package broker

import (
	"cmp"
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

	// sessionHello marks a connection made with session_hello: a peer of
	// its own, addressed by its session key only, with its own status,
	// summary and name. A legacy hello with a sessionPubkey receives for
	// both keys and counts as its member in broadcasts and groups.
	sessionHello bool
	// keys are what the connection receives for (its conn's keys): pushes
	// follow them as its drains do.
	keys []string
	// ownStatus, ownSummary and ownName are a session_hello connection's
	// own ("" until it sets them: the member's).
	ownStatus, ownSummary, ownName string
}

// pubkey is the key peers see: the session key, else the member key.
func (p *presence) pubkey() string {
	if p.sessionPubkey != "" {
		return p.sessionPubkey
	}
	return p.member.Pubkey
}

// recipient is the key the presence is addressed by in broadcasts and
// groups: a session_hello connection's session key, else the member key.
func (p *presence) recipient() string {
	if p.sessionHello {
		return p.sessionPubkey
	}
	return p.member.Pubkey
}

// receives reports whether the connection takes deliveries for key.
func (p *presence) receives(key string) bool { return slices.Contains(p.keys, key) }

// takes reports whether p is live and takes a message to key now: working
// and dnd take only priority "now" (a session's status, else its member's).
func (p *presence) takes(key string, now bool) bool {
	return !p.offline && p.receives(key) && (now || p.status() == broker.StatusIdle)
}

func (p *presence) status() string  { return cmp.Or(p.ownStatus, p.member.Status) }
func (p *presence) summary() string { return cmp.Or(p.ownSummary, p.member.Summary) }
func (p *presence) name() string    { return cmp.Or(p.ownName, p.member.DisplayName) }

func (p *presence) role() string {
	if p.sessionPubkey != "" {
		return "session"
	}
	return "control-plane"
}

func (p *presence) inGroup(name string) bool { return inGroup(p.groups, name) }

// listedGroups are the groups a peers_list entry shows: [] for none, as
// upstream's broker sends it, never null.
func (p *presence) listedGroups() []messages.Group {
	if p.groups == nil {
		return []messages.Group{}
	}
	return p.groups
}

// inGroup reports whether groups claim the group name, or one below it.
func inGroup(groups []messages.Group, name string) bool {
	for _, g := range groups {
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
	// senderKeys are the sending connection's keys: no broadcast, topic or
	// group send reaches them (a DM goes to the key it names).
	// topicMembers are, for a `#<id>` target, who joined the topic (read
	// from the store by the connection, conn_topics.go);
	// remoteSessions, for a target of more than one key on PostgreSQL, the
	// sessions connected to other replicas (conn_sessions.go).
	hubResolve struct {
		meshID, senderConn, targetSpec, priority string
		senderKeys                               []string
		topicMembers                             *broker.TopicAudience
		remoteSessions                           []broker.Session
	}
	hubResolved struct {
		kind, ref  string
		recipients []string // pubkeys (member or session keys) that get a delivery row
		online     []string // of those, the ones pushed to right after the commit
		// sessionMembers maps a DM's session-key target to its member, for
		// the store's check that the recipient exists.
		sessionMembers map[string]string
	}
	// hubFanout pushes an encoded frame to the live connections receiving
	// for the recipients. A recipient left with none (its connection
	// closed after the send was resolved) has a row leased for a push that
	// cannot happen: the sweeper is told to release it (releaseLeases).
	hubFanout struct {
		meshID, senderConn string
		recipients         []string
		frame              []byte
	}
	// hubSweeper tells the hub where the sweeper is (it starts after the
	// hub, which it needs); sent once, before any fanout.
	hubSweeper struct{ pid *actor.PID }
	// hubListPeers asks for the peer list; the reply is *messages.PeersListFrame.
	hubListPeers struct{ meshID, requesterMember string }
	// hubMemberChanged replaces the hub's copy of a member (profile change).
	hubMemberChanged struct{ member *broker.Member }
	// hubPresenceChanged sets a session_hello connection's own status or
	// summary (nil: unchanged); they live here, not in the member's
	// stored profile.
	hubPresenceChanged struct {
		connID          string
		status, summary *string
	}
	// hubRedeliver tells the connections of these recipients (or, with
	// all, every live connection) to drain.
	hubRedeliver struct {
		recipients []broker.Recipient
		all        bool
	}
	// hubFallback asks the hub to drain the connections here that would
	// take deliveries of these waiting recipients (the relay's look); the
	// reply is *hubDrained.
	hubFallback struct{ waiting []broker.Waiting }
	hubDrained  struct{ conns int }
	// hubRevoked: these members were revoked; their connections are closed
	// and they leave the peer lists.
	hubRevoked struct{ members []broker.Recipient }
	// hubSessionTaken: the session's key connected again at another
	// replica, which took its row over from this connection.
	hubSessionTaken struct{ taken *broker.SessionTaken }
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
	case *hubDrainedPush:
		h.drainedPush(m)
	case *hubSweeper:
		h.sweeper = m.pid
	case *hubListPeers:
		ctx.Respond(h.peers(m))
	case *hubMemberChanged:
		h.memberChanged(m.member)
	case *hubPresenceChanged:
		h.presenceChanged(m)
	case *hubRedeliver:
		h.redeliver(ctx, m)
	case *hubFallback:
		ctx.Respond(h.fallback(ctx, m))
	case *hubRevoked:
		h.revoked(ctx, m)
	case *hubMeshPush:
		h.meshPush(m)
	case *hubSessionTaken:
		h.sessionTaken(m.taken)
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
		// The same session (member, session id and key) reconnecting, or
		// any second connection of one session key: the older goes, so
		// that a key is never listed twice (no ghost peers).
		same := old.member.Pubkey == p.member.Pubkey && old.sessionID == p.sessionID && old.sessionPubkey == p.sessionPubkey
		if !same && (p.sessionPubkey == "" || old.sessionPubkey != p.sessionPubkey) {
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
	h.forget(connID, p)
	h.system(p, "peer_left")
}

// forget takes connection connID, p, out of the hub's maps, saying nothing
// to the mesh (sessionTaken: the session did not leave).
func (h *hub) forget(connID string, p *presence) {
	delete(h.conns, connID)
	delete(h.byMesh[p.meshID], connID)
	if len(h.byMesh[p.meshID]) == 0 {
		delete(h.byMesh, p.meshID)
	}
}

// system pushes a presence event about p to the live connections of the
// other members of its mesh.
func (h *hub) system(p *presence, event string) {
	data, _ := json.Marshal(map[string]any{"name": p.name(), "pubkey": p.pubkey(), "groups": p.groups})
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

// presenceChanged records a session's own status or summary.
func (h *hub) presenceChanged(m *hubPresenceChanged) {
	p := h.conns[m.connID]
	if p == nil {
		return
	}
	if m.status != nil {
		p.ownStatus = *m.status
	}
	if m.summary != nil {
		p.ownSummary = *m.summary
	}
}

// resolve answers a send's recipients. Every connected identity is a
// recipient of its own: a member connection by its member key, a
// session_hello connection by its session key.
func (h *hub) resolve(q *hubResolve) *hubResolved {
	t := q.targetSpec
	r := &hubResolved{kind: messages.KindTopic, ref: t}
	switch {
	case t == "*" || t == "@all":
		r.recipients = h.everyone(q)
	case strings.HasPrefix(t, "#"):
		r.ref = t[1:]
		r.recipients = h.topicMembers(q)
	case strings.HasPrefix(t, "@"):
		r.recipients = h.groupMembers(q, t[1:])
	default:
		r.kind, r.recipients = messages.KindDM, []string{t}
		r.sessionMembers = h.sessionMembers(q.meshID, t)
	}
	for _, pk := range r.recipients {
		if h.pushable(q.meshID, pk, q.priority) {
			r.online = append(r.online, pk)
		}
	}
	return r
}

// everyone is the recipients of a broadcast: every active member
// key of the mesh and the session key of every live session_hello
// connection of an active member, here or at another replica, but the
// sender's keys.
func (h *hub) everyone(q *hubResolve) []string {
	members := h.meshMembers(q.meshID)
	keys := make(map[string]bool, len(members))
	for pk := range members {
		keys[pk] = true
	}
	h.addSessions(q, keys, func(_, member string) bool { return members[member] != nil })
	return sortedBut(keys, q.senderKeys)
}

// groupMembers is the recipients of @group: the recipient key of every
// live connection claiming the group, and of every session claiming it at
// another replica, but the sender's keys.
func (h *hub) groupMembers(q *hubResolve, group string) []string {
	keys := map[string]bool{}
	for _, p := range h.byMesh[q.meshID] {
		if !p.offline && p.inGroup(group) {
			keys[p.recipient()] = true
		}
	}
	for _, s := range q.remoteSessions {
		if inGroup(s.Groups, group) {
			keys[s.SessionPubkey] = true
		}
	}
	return sortedBut(keys, q.senderKeys)
}

// addSessions adds to keys the session key of every live session_hello
// connection here, and of every session connected to another replica,
// that passes (given its session key and its member's). A legacy hello's
// session is left out there as here: its connection receives for its
// member key too, by which such a send reaches it.
func (h *hub) addSessions(q *hubResolve, keys map[string]bool, pass func(session, member string) bool) {
	for _, p := range h.byMesh[q.meshID] {
		if !p.offline && p.sessionHello && pass(p.sessionPubkey, p.member.Pubkey) {
			keys[p.sessionPubkey] = true
		}
	}
	for _, s := range q.remoteSessions {
		if !s.Legacy && pass(s.SessionPubkey, s.MemberPubkey) {
			keys[s.SessionPubkey] = true
		}
	}
}

// sortedBut returns the keys of set not in but, sorted.
func sortedBut(set map[string]bool, but []string) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		if !slices.Contains(but, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// sessionMembers maps key to its member when it is the session key of a
// connection the hub knows (offline ones too: a DM to a session within
// its grace queues for its reconnect); nil for any other key. The store
// checks a DM's recipient by that member; a key not mapped here (a member
// key, a session connected to another replica, or no one's) it looks up
// itself.
func (h *hub) sessionMembers(meshID, key string) map[string]string {
	for _, p := range h.byMesh[meshID] {
		if p.sessionPubkey == key {
			return map[string]string{key: p.member.Pubkey}
		}
	}
	return nil
}

// pushable reports whether a live connection receiving for key takes a
// message of this priority now (presence.takes).
func (h *hub) pushable(meshID, key, priority string) bool {
	for _, p := range h.byMesh[meshID] {
		if p.takes(key, priority == "now") {
			return true
		}
	}
	return false
}

// fanout pushes the frame once to each live connection receiving for one
// of the recipients — not to the other connections of their members — but
// the sender's, and has the sweeper release the leases of the recipients
// it reached no connection of.
func (h *hub) fanout(ctx actor.Context, f *hubFanout) {
	reached := make(map[string]bool, len(f.recipients))
	for _, k := range f.recipients {
		reached[k] = false
	}
	for _, p := range h.byMesh[f.meshID] {
		if p.offline || p.connID == f.senderConn {
			continue
		}
		hit := false
		for _, k := range p.keys {
			if _, ok := reached[k]; ok {
				reached[k], hit = true, true
			}
		}
		if hit {
			h.metrics.pushes.Inc() // counted before anyone can see it
			p.link.Send(f.frame)
		}
	}
	var missed []string
	for _, k := range f.recipients {
		if !reached[k] {
			missed = append(missed, k)
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
		// An offline presence (in its reconnect grace) is not listed: the
		// list is who is connected, and a session that ended must not
		// linger in it. Messages to it still queue during the grace.
		if p.offline || !m.Visible && m.Pubkey != q.requesterMember {
			continue
		}
		out.Peers = append(out.Peers, messages.Peer{Pubkey: p.pubkey(), MemberPubkey: m.Pubkey, DisplayName: p.name(),
			Status: p.status(), Summary: p.summary(), Groups: p.listedGroups(), SessionID: p.sessionID,
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
			if !p.offline && p.receives(r.Pubkey) {
				ctx.Send(p.pid, &drain{})
			}
		}
	}
}

// fallback drains, once each, the live connections receiving for a waiting
// recipient that would claim one of its rows: a busy one (working, dnd)
// only when a row has priority "now".
func (h *hub) fallback(ctx actor.Context, m *hubFallback) *hubDrained {
	drained := map[string]bool{}
	for _, w := range m.waiting {
		for id, p := range h.byMesh[w.MeshID] {
			if !drained[id] && p.takes(w.Pubkey, w.Now) {
				drained[id] = true
				ctx.Send(p.pid, &drain{})
			}
		}
	}
	return &hubDrained{conns: len(drained)}
}
