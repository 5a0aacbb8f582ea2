package ipc

import (
	"context"
	"net/http"

	"github.com/claudemesh/claudemesh-go/messages"
)

// State asks GET /v1/state?key=: the key of mesh's state ("" for the
// daemon's only mesh, or a session's own); a missing key is a 404
// state_not_found *messages.Error.
func (c *Client) State(ctx context.Context, mesh, key string) (*messages.StateGot, error) {
	var res messages.StateGot
	return &res, c.do(ctx, http.MethodGet, "/v1/state"+query("mesh", mesh, "key", key), nil, &res)
}

// StateList asks GET /v1/state: every key of mesh's state.
func (c *Client) StateList(ctx context.Context, mesh string) (*messages.StateList, error) {
	var res messages.StateList
	return &res, c.do(ctx, http.MethodGet, "/v1/state"+query("mesh", mesh), nil, &res)
}

// SetState asks POST /v1/state; a compare-and-set that does not match is a
// 409 state_conflict *messages.Error whose State is the key as it is.
func (c *Client) SetState(ctx context.Context, req *messages.StateSetRequest) (*messages.StateSetDone, error) {
	var res messages.StateSetDone
	return &res, c.do(ctx, http.MethodPost, "/v1/state", req, &res)
}
