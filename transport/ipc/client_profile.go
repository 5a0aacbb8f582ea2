package ipc

import (
	"context"
	"net/http"
	"net/url"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Profiles asks GET /v1/profile: this daemon's profile on mesh, or on
// every mesh when mesh is ""; a session's client gets its session's mesh.
func (c *Client) Profiles(ctx context.Context, mesh string) (*messages.OwnProfiles, error) {
	path := "/v1/profile"
	if mesh != "" {
		path += "?" + url.Values{"mesh": {mesh}}.Encode()
	}
	var res messages.OwnProfiles
	return &res, c.do(ctx, http.MethodGet, path, nil, &res)
}
