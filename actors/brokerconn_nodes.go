package actors

import (
	"fmt"
	"net/http"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/wsclient"
)

// NodesTimeout is how long a node list waits for the broker's answer.
const NodesTimeout = 5 * time.Second

// The mesh's nodes on a broker link: GET /v1/nodes relayed as list_nodes,
// correlated by _reqId, to a broker that advertised the ability; one that
// did not (upstream's, a legacy connection) is not asked: the answer is
// 501 nodes_unsupported at once.
type nodesRelay struct {
	b     *BrokerConn
	calls asks[*messages.NodesRequest]
}

// nodesIDs prefixes the _reqId of a list_nodes.
const nodesIDs = "nd"

// nodesExpired is the timer of the request id.
type nodesExpired struct{ id string }

func (r *nodesRelay) routes() relayRoutes {
	return relayRoutes{ids: nodesIDs,
		messages: []route{on(r.request), on(r.expired)},
		frames:   []route{on(r.listed)},
		refused:  r.refused,
		down:     r.down,
	}
}

func (r *nodesRelay) request(ctx actor.Context, m *messages.NodesRequest) {
	if r.b.lacks(wsclient.AbilityNodes) {
		ctx.Respond(&messages.NodesReply{Err: &messages.Error{Status: http.StatusNotImplemented, Code: messages.CodeNodesUnsupported,
			Detail: fmt.Sprintf("the broker of mesh %s does not list nodes (it is upstream's, or older than claudemesh's nodes): "+
				"see the mesh's peers with `claudemesh peers` instead", r.b.cfg.Slug)}})
		return
	}
	id := r.calls.ask(nodesIDs, ctx.Sender(), m)
	if err := r.b.send(&messages.ListNodesFrame{Type: messages.TypeListNodes, ReqID: id}); err != nil {
		r.calls.answer(ctx, id, &messages.NodesReply{Err: err})
		return
	}
	workers.SendLater(ctx, NodesTimeout, &nodesExpired{id: id})
}

func (r *nodesRelay) listed(ctx actor.Context, f *messages.NodeListFrame) {
	r.calls.answer(ctx, f.ReqID, &messages.NodesReply{Nodes: f.Nodes, StaleAfterMs: f.StaleAfterMs})
}

func (r *nodesRelay) refused(ctx actor.Context, id string, f *messages.ErrorFrame) bool {
	return r.calls.answer(ctx, id, &messages.NodesReply{Err: r.b.brokerRefused(f)})
}

func (r *nodesRelay) expired(ctx actor.Context, m *nodesExpired) {
	r.calls.answer(ctx, m.id, &messages.NodesReply{Err: messages.BrokerTimedOut(r.b.cfg.Slug, messages.TypeListNodes, NodesTimeout)})
}

// down fails every node list in flight: the connection is gone.
func (r *nodesRelay) down(ctx actor.Context) {
	r.calls.answerAll(ctx, func() any { return &messages.NodesReply{Err: ErrNotConnected} })
}
