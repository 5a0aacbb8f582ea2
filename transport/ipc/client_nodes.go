package ipc

import (
	"context"
	"net/http"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Nodes asks GET /v1/nodes: the daemons of mesh ("" for the daemon's only
// mesh, or a session's own) with their state; a broker that does not list
// nodes is a 501 nodes_unsupported *messages.Error.
func (c *Client) Nodes(ctx context.Context, mesh string) (*messages.NodeList, error) {
	var res messages.NodeList
	return &res, c.do(ctx, http.MethodGet, "/v1/nodes"+query("mesh", mesh), nil, &res)
}
