package ipc

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Remember asks POST /v1/memory: the new memory's id.
func (c *Client) Remember(ctx context.Context, req *messages.RememberRequest) (*messages.Remembered, error) {
	var res messages.Remembered
	return &res, c.do(ctx, http.MethodPost, "/v1/memory", req, &res)
}

// Recall asks GET /v1/memory: the memories of mesh ("" for the daemon's
// only mesh, or a session's own) matching query with every tag, best
// first; at most limit (0: the broker's default).
func (c *Client) Recall(ctx context.Context, mesh, query string, tags []string, limit int) (*messages.MemoryMatches, error) {
	q := url.Values{}
	for name, v := range map[string]string{"mesh": mesh, "q": query} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	q["tag"] = tags
	path := "/v1/memory"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var res messages.MemoryMatches
	return &res, c.do(ctx, http.MethodGet, path, nil, &res)
}

// Forget asks DELETE /v1/memory/<id>.
func (c *Client) Forget(ctx context.Context, mesh, id string) (*messages.Forgotten, error) {
	var res messages.Forgotten
	return &res, c.do(ctx, http.MethodDelete, "/v1/memory/"+url.PathEscape(id)+query("mesh", mesh), nil, &res)
}
