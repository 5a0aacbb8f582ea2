package actors

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/wsclient"
)

// NodesTimeout is how long a node list waits for the broker's answer.
const NodesTimeout = 5 * time.Second

// The mesh's nodes on a broker connection: GET /v1/nodes relayed as
// list_nodes, correlated by _reqId, to a broker that advertised the
// ability; one that did not (upstream's, a legacy connection) is not
// asked: the answer is 501 nodes_unsupported at once.

// nodesExpired is the timer of the request id.
type nodesExpired struct{ id string }

func (b *BrokerConn) nodesRequest(ctx actor.Context) {
	if b.lacks(wsclient.AbilityNodes) {
		ctx.Respond(&messages.NodesReply{Err: &messages.Error{Status: http.StatusNotImplemented, Code: messages.CodeNodesUnsupported,
			Detail: fmt.Sprintf("the broker of mesh %s does not list nodes (it is upstream's, or older than claudemesh's nodes): "+
				"see the mesh's peers with `claudemesh peers` instead", b.cfg.Slug)}})
		return
	}
	id := b.nodes.call("nd", ctx.Sender())
	if err := b.send(&messages.ListNodesFrame{Type: messages.TypeListNodes, ReqID: id}); err != nil {
		b.nodesAnswer(ctx, b.takeNodes(id), &messages.NodesReply{Err: err})
		return
	}
	workers.SendLater(ctx, NodesTimeout, &nodesExpired{id: id})
}

// lacks reports whether the connected broker did not advertise ability
// (upstream's, or an older one): a request of it is not sent. While the
// link is down nothing is known, and the request fails as unsent.
func (b *BrokerConn) lacks(ability string) bool {
	return b.session != nil && !slices.Contains(b.session.Abilities, ability)
}

// nodesError answers the node list an error frame names; it reports false
// for an error of no node list.
func (b *BrokerConn) nodesError(ctx actor.Context, f *messages.ErrorFrame) bool {
	who := b.takeNodes(cmp.Or(f.ReqID, f.ID))
	if who == nil {
		return false
	}
	b.nodesAnswer(ctx, who, &messages.NodesReply{Err: b.brokerRefused(f)})
	return true
}

func (b *BrokerConn) nodesExpired(ctx actor.Context, m *nodesExpired) {
	if who := b.takeNodes(m.id); who != nil {
		b.nodesAnswer(ctx, who, &messages.NodesReply{Err: messages.BrokerTimedOut(b.cfg.Slug, messages.TypeListNodes, NodesTimeout)})
	}
}

// nodesDown fails every node list in flight: the connection is gone.
func (b *BrokerConn) nodesDown(ctx actor.Context) {
	for _, who := range b.nodes.drain() {
		b.nodesAnswer(ctx, who, &messages.NodesReply{Err: ErrNotConnected})
	}
}

// takeNodes removes and returns who asked for the node list of id (nil:
// none, or already answered).
func (b *BrokerConn) takeNodes(id string) *actor.PID {
	who, _ := b.nodes.take(id)
	return who
}

func (b *BrokerConn) nodesAnswer(ctx actor.Context, who *actor.PID, reply *messages.NodesReply) {
	if who != nil {
		ctx.Send(who, reply)
	}
}
