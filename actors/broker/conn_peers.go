package broker

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// peerFrames are the frames of the peer list and of a connection's
// presence: each tells the hub. set_visible and set_profile change the
// member's profile and answer an empty ack.
var peerFrames = frames{
	acts((*conn).listPeers),
	acts((*conn).setStatus),
	acts((*conn).setSummary),
	acts(func(c *conn, ctx actor.Context, f *messages.SetVisibleFrame) {
		c.setProfile(ctx, broker.ProfileUpdate{Visible: &f.Visible}, &f.ReqID)
	}),
	acts(func(c *conn, ctx actor.Context, f *messages.SetProfileFrame) {
		c.setProfile(ctx, broker.ProfileUpdate{Avatar: f.Avatar, Title: f.Title, Bio: f.Bio, Capabilities: capabilities(f)}, &f.ReqID)
	}),
}

func (c *conn) listPeers(ctx actor.Context, f *messages.ListPeersFrame) {
	res, err := ctx.RequestFuture(c.hub, &hubListPeers{meshID: c.mesh.ID, requesterMember: c.member.Pubkey}, askTimeout).Result()
	if err != nil {
		c.sendFrame(&messages.ErrorFrame{Type: messages.TypeError, Code: "unavailable", Message: err.Error(), ReqID: f.ReqID})
		return
	}
	list := res.(*messages.PeersListFrame)
	list.ReqID = f.ReqID
	if c.directory {
		if err := c.addDirectory(list); err != nil {
			c.log.Error("list members", "conn", c.id, "err", err)
			c.sendFrame(&messages.ErrorFrame{Type: messages.TypeError, Code: "unavailable", Message: "the broker could not list the mesh's members", ReqID: f.ReqID})
			return
		}
	}
	c.sendFrame(list)
}

// addDirectory appends to a peer list, for a client that negotiated
// member_directory, what the hub of this broker does not know: the
// members not connected here (addOfflineMembers), then the sessions
// connected to other replicas (addRemoteSessions, conn_sessions.go).
func (c *conn) addDirectory(list *messages.PeersListFrame) error {
	members, err := c.store.Members(context.Background(), c.mesh.ID)
	if err != nil {
		return err
	}
	c.addOfflineMembers(list, members)
	return c.addRemoteSessions(list, members)
}

// addOfflineMembers appends to a peer list one entry per active member
// none of whose connections it lists (offline, or connected to another
// replica): its member key and name, peerRole "member", status "offline".
// A name then resolves to a member that is away, and a DM to it queues;
// names are compared against every member, not only those online.
// Members hidden with set_visible are left out as they are from the list
// (but for the requester itself).
func (c *conn) addOfflineMembers(list *messages.PeersListFrame, members []broker.Member) {
	listed := make(map[string]bool, len(list.Peers))
	for _, p := range list.Peers {
		listed[p.MemberPubkey] = true
	}
	for _, m := range members {
		if listed[m.Pubkey] || !m.Visible && m.Pubkey != c.member.Pubkey {
			continue
		}
		list.Peers = append(list.Peers, messages.Peer{Pubkey: m.Pubkey, MemberPubkey: m.Pubkey, DisplayName: m.DisplayName,
			Status: messages.PeerStatusOffline, Summary: m.Summary, Groups: []messages.Group{}, PeerRole: messages.PeerRoleMember,
			Visible: m.Visible, Avatar: m.Avatar, Title: m.Title, Bio: m.Bio, Capabilities: m.Capabilities})
	}
}

// setStatus sets a session's own status (kept by the hub, in memory), else
// the member's stored one; going idle drains what the old status held.
func (c *conn) setStatus(ctx actor.Context, f *messages.SetStatusFrame) {
	switch f.Status {
	case broker.StatusIdle, broker.StatusWorking, "dnd":
	default:
		c.sendFrame(&messages.ErrorFrame{Type: messages.TypeError, Code: "invalid_status", Message: "status must be idle, working or dnd"})
		return
	}
	if c.session {
		c.status = f.Status
		ctx.Send(c.hub, &hubPresenceChanged{connID: c.id, status: &f.Status})
	} else if !c.setProfile(ctx, broker.ProfileUpdate{Status: &f.Status}, nil) {
		return
	}
	if f.Status == broker.StatusIdle {
		ctx.Send(ctx.Self(), &drain{}) // held next/low messages may go now
	}
}

// setSummary sets a session's own summary, else the member's.
func (c *conn) setSummary(ctx actor.Context, f *messages.SetSummaryFrame) {
	if c.session {
		ctx.Send(c.hub, &hubPresenceChanged{connID: c.id, summary: &f.Summary})
		return
	}
	c.setProfile(ctx, broker.ProfileUpdate{Summary: &f.Summary}, nil)
}

// setProfile persists the fields of u, updates the hub's copy and, when
// the frame carried a _reqId (set_visible, set_profile), answers the
// upstream empty ack.
func (c *conn) setProfile(ctx actor.Context, u broker.ProfileUpdate, reqID *string) bool {
	member, err := c.store.SetProfile(context.Background(), c.mesh.ID, c.member.Pubkey, u)
	if err != nil {
		c.sendFrame(&messages.ErrorFrame{Type: messages.TypeError, Code: "invalid_profile", Message: err.Error()})
		return false
	}
	c.member = member
	ctx.Send(c.hub, &hubMemberChanged{member: member})
	if reqID != nil {
		c.sendFrame(&messages.AckFrame{Type: messages.TypeAck, ID: *reqID})
	}
	return true
}

func capabilities(f *messages.SetProfileFrame) []string {
	if f.Capabilities == nil {
		return nil
	}
	if *f.Capabilities == nil {
		return []string{}
	}
	return *f.Capabilities
}
