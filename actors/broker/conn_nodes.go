package broker

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Nodes (messages/node_frames.go): a daemon's member connection is its
// node in the mesh, recorded in the store's node table — connected at the
// hello, seen at each heartbeat (the pong answering the WebSocket layer's
// ping: one write per ping interval, never one per frame), disconnected
// at the close. Every replica on one database writes and lists the same
// table; a node whose replica died is never closed, and is listed stale
// once it has gone unheard for the stale threshold.

// nodeFrames are the node requests.
var nodeFrames = frames{
	answers((*conn).listNodes),
}

// NodeStaleBeats is the default stale threshold in ping intervals: a
// node missing three heartbeats in a row is stale.
const NodeStaleBeats = 3

// heartbeat is the connection's pong to the broker's latest ping.
type heartbeat struct{}

// Beat tells the connection's actor that the client answered the ping
// (wsserver.Heartbeat).
func (s *session) Beat() { s.root.Send(s.pid, &heartbeat{}) }

// isNode reports whether a member hello opens a daemon's connection: one
// without a session key (a session is a peer, not a node), from anything
// but our CLI's own short connections.
func isNode(f *messages.HelloFrame) bool {
	return f.SessionPubkey == "" && f.Channel != messages.ChannelCLI
}

// connectNode records the node of an admitted daemon connection.
func (c *conn) connectNode() {
	if c.node == nil {
		return
	}
	c.node.MeshID, c.node.MemberID, c.node.Replica, c.node.ConnID = c.mesh.ID, c.member.ID, c.replica, c.id
	if err := c.store.ConnectNode(context.Background(), *c.node); err != nil {
		c.log.Warn("record a node", "conn", c.id, "err", err) // its heartbeats change nothing then; it reconnects
	}
}

// recorded reports whether this is a daemon connection whose node was
// recorded (connectNode).
func (c *conn) recorded() bool { return c.node != nil && c.node.ConnID != "" }

// heartbeat keeps the connection's node row, or its session's
// (conn_sessions.go), seen.
func (c *conn) heartbeat(ctx actor.Context) {
	c.seeSession(ctx)
	if !c.recorded() {
		return
	}
	if err := c.store.SeeNode(context.Background(), *c.node); err != nil {
		c.log.Warn("record a node's heartbeat", "conn", c.id, "err", err) // the next one may pass
	}
}

func (c *conn) disconnectNode() {
	if !c.recorded() {
		return
	}
	if err := c.store.DisconnectNode(context.Background(), *c.node); err != nil {
		c.log.Warn("record a node's close", "conn", c.id, "err", err) // it turns stale instead
	}
}

func (c *conn) listNodes(f *messages.ListNodesFrame) {
	if c.legacy != nil {
		return // upstream has no list_nodes, and ignores the frame types it does not know
	}
	nodes, err := c.store.Nodes(context.Background(), c.mesh.ID, c.staleAfter)
	if err != nil {
		c.log.Error("list nodes", "conn", c.id, "err", err)
		c.sendFrame(&messages.ErrorFrame{Type: messages.TypeError, Code: CodeUnavailable,
			Message: "the broker could not read the mesh's nodes; retry", ID: f.ReqID, ReqID: f.ReqID})
		return
	}
	out := &messages.NodeListFrame{Type: messages.TypeNodeList, Nodes: make([]messages.NodeInfo, len(nodes)),
		StaleAfterMs: c.staleAfter.Milliseconds(), ReqID: f.ReqID}
	for i, n := range nodes {
		out.Nodes[i] = messages.NodeInfo{Pubkey: n.Pubkey, Name: n.Name, Host: n.Host, Version: n.Version, State: n.State,
			LastSeenAt: n.LastSeenAt.UTC().Format(time.RFC3339Nano), ConnectedAt: n.ConnectedAt.UTC().Format(time.RFC3339Nano)}
	}
	c.sendFrame(out)
}
