package broker

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// Sessions across replicas (persistence/broker/session.go): on PostgreSQL
// a session_hello connection keeps its session's row in the store's
// mesh_session table — written at the hello (before the hello_ack, so a
// DM sent to the key after the ack is accepted at any replica), at each
// heartbeat (counting a stale threshold ahead) and at the close (a grace
// ahead, as the hub keeps a dropped presence). Another replica's accept
// reads it for a DM to a key its hub does not know, its connections for a
// broadcast, topic or group send (the hub adds those sessions as it adds
// its own) and for a peer list with the member directory (a legacy hello
// naming a sessionPubkey keeps one too); the delivery
// rides the NOTIFY (and the relay's poll) as a member's does, and this
// replica's hub drains the connection receiving for the key. A SQLite
// broker is the only one of its database: its hub knows every session,
// and no row is written or read.

// listenSessions hands the hub the session takeovers that name a
// connection of this replica until ctx is done (PostgreSQL; on SQLite the
// hub sees both connections itself).
func listenSessions(ctx context.Context, d *deps, root *actor.RootContext) {
	startListening(ctx, d, "sessions", func(connected func()) {
		_ = d.store.ListenSessions(ctx, connected, func(t *broker.SessionTaken) {
			if t.Replica == d.replica {
				root.Send(d.hub, &hubSessionTaken{taken: t})
			}
		})
	})
}

// sessionTaken closes the connection of this replica that held a session
// until its key connected at another replica, and takes it out of the
// peer lists at once, without a peer_left: the session did not leave, it
// is listed where it now is (conn_sessions.go), as register does for two
// connections of one key here.
func (h *hub) sessionTaken(t *broker.SessionTaken) {
	p := h.conns[t.ConnID]
	if p == nil || p.meshID != t.MeshID || p.sessionPubkey != t.SessionPubkey {
		return // gone already, or the notification is not about it
	}
	h.metrics.sessionsTaken.Inc() // before the close, which whoever watches the count may see first
	if !p.offline {
		p.link.Close(1000, "session_replaced")
	}
	h.forget(t.ConnID, p)
}

// replicated reports whether the store may be shared with other replicas
// (PostgreSQL).
func (d *deps) replicated() bool { return d.store.Backend() == "postgres" }

// recordSession notes, for a session_hello connection on a shared
// (PostgreSQL) store, the row its session will hold.
func (c *conn) recordSession(f *messages.SessionHelloFrame) {
	if !c.replicated() {
		return
	}
	c.sessionRow = &broker.SessionConn{MeshID: f.MeshID, SessionPubkey: f.SessionPubkey, MemberPubkey: f.ParentMemberPubkey,
		DisplayName: f.DisplayName, SessionID: f.SessionID, Hostname: f.Hostname, Cwd: f.Cwd, PeerType: f.PeerType,
		Channel: f.Channel, Groups: f.Groups}
}

// recordLegacySession does what recordSession does for a hello that names
// a sessionPubkey (upstream's CLI: the connection receives for the session
// key and the member's), so that a DM to that key is accepted, and
// delivered here, from any replica.
func (c *conn) recordLegacySession(f *messages.HelloFrame, member *broker.Member) {
	if !c.replicated() || f.SessionPubkey == "" {
		return
	}
	c.sessionRow = &broker.SessionConn{MeshID: f.MeshID, SessionPubkey: f.SessionPubkey, MemberPubkey: member.Pubkey,
		DisplayName: cmp.Or(f.DisplayName, member.DisplayName), SessionID: f.SessionID, Hostname: f.Hostname, Cwd: f.Cwd,
		PeerType: f.PeerType, Channel: f.Channel, Groups: f.Groups, Legacy: true}
}

// connectSession writes the row of an admitted session connection.
func (c *conn) connectSession() {
	if c.sessionRow == nil {
		return
	}
	c.sessionRow.Replica, c.sessionRow.ConnID = c.replica, c.id
	if err := c.store.ConnectSession(context.Background(), *c.sessionRow, c.staleAfter); err != nil {
		// A DM to it from another replica is refused until it reconnects.
		c.log.Warn("record a session", "conn", c.id, "err", err)
	}
}

// seeSession records the heartbeat of a session connection. One that no
// longer holds its row learns it here at the latest, whatever notification
// this replica missed: taken over by a connection that counts, it is
// closed as a takeover's notification closes it; its row gone (swept after
// heartbeats that could not be written) or closed by the connection that
// took it over, it writes the row again, so that other replicas accept DMs
// to it again.
func (c *conn) seeSession(ctx actor.Context) {
	if c.sessionRow == nil {
		return
	}
	hold, err := c.store.SeeSession(context.Background(), *c.sessionRow, c.staleAfter)
	switch {
	case err != nil:
		c.log.Warn("record a session's heartbeat", "conn", c.id, "err", err) // the next one may pass
	case hold == broker.SessionTakenOver:
		c.log.Info("session_taken_over_unnotified", "conn", c.id, "session_pubkey", c.sessionRow.SessionPubkey)
		ctx.Send(c.hub, &hubSessionTaken{taken: &broker.SessionTaken{MeshID: c.sessionRow.MeshID,
			SessionPubkey: c.sessionRow.SessionPubkey, Replica: c.replica, ConnID: c.id}})
	case hold == broker.SessionLost:
		c.log.Info("session_row_written_again", "conn", c.id, "session_pubkey", c.sessionRow.SessionPubkey)
		c.connectSession()
	}
}

func (c *conn) disconnectSession() {
	if c.sessionRow == nil {
		return
	}
	if err := c.store.DisconnectSession(context.Background(), *c.sessionRow, c.grace); err != nil {
		c.log.Warn("record a session's close", "conn", c.id, "err", err) // it stops counting at its stale threshold
	}
}

// addRemoteSessions appends to a peer list, for a client that negotiated
// member_directory, the sessions connected to other replicas of the
// store (on SQLite there are none) that it does not list, of the active
// members given, hidden ones left out as addOfflineMembers leaves them: a
// name then resolves to a session wherever it is connected, as a member's
// does. Their status and summary are their member's (a session's own
// live in its replica's hub).
func (c *conn) addRemoteSessions(list *messages.PeersListFrame, members []broker.Member) error {
	if !c.replicated() {
		return nil
	}
	sessions, err := c.store.Sessions(context.Background(), c.mesh.ID)
	if err != nil {
		return err
	}
	listed := make(map[string]bool, len(list.Peers))
	for _, p := range list.Peers {
		listed[p.Pubkey] = true
	}
	byKey := make(map[string]*broker.Member, len(members))
	for i := range members {
		byKey[members[i].Pubkey] = &members[i]
	}
	for _, s := range sessions {
		m := byKey[s.MemberPubkey]
		if s.Replica == c.replica || listed[s.SessionPubkey] || m == nil || !m.Visible && m.Pubkey != c.member.Pubkey {
			continue
		}
		list.Peers = append(list.Peers, messages.Peer{Pubkey: s.SessionPubkey, MemberPubkey: m.Pubkey,
			DisplayName: cmp.Or(s.DisplayName, m.DisplayName), Status: m.Status, Summary: m.Summary, Groups: s.Groups,
			SessionID: s.SessionID, ConnectedAt: s.ConnectedAt.UTC().Format(time.RFC3339Nano), Cwd: s.Cwd,
			PeerRole: "session", Hostname: s.Hostname, PeerType: s.PeerType, Channel: s.Channel, Visible: m.Visible,
			Avatar: m.Avatar, Title: m.Title, Bio: m.Bio, Capabilities: m.Capabilities})
	}
	return nil
}

// remoteSessions reads, for a send to more than one key (`*`, `@all`,
// `#<id>`, `@group`) on PostgreSQL, the sessions connected to other
// replicas, which the hub adds to the recipients as it adds its own (by
// member, topic membership or group); a failed read is answered 503.
func (c *conn) remoteSessions(ack *messages.AckFrame, targetSpec string) ([]broker.Session, bool) {
	if !c.replicated() || !strings.HasPrefix(targetSpec, "#") && !strings.HasPrefix(targetSpec, "@") && targetSpec != "*" {
		return nil, true
	}
	list, err := c.store.Sessions(context.Background(), c.mesh.ID)
	if err != nil {
		c.failedSend(ack, err)
		return nil, false
	}
	return slices.DeleteFunc(list, func(s broker.Session) bool { return s.Replica == c.replica }), true
}
