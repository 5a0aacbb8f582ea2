package ipc

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Topics asks GET /v1/topics: the topics of mesh ("" for the daemon's only
// mesh, or a session's own).
func (c *Client) Topics(ctx context.Context, mesh string) (*messages.TopicList, error) {
	var res messages.TopicList
	return &res, c.do(ctx, http.MethodGet, "/v1/topics"+query("mesh", mesh), nil, &res)
}

// CreateTopic asks POST /v1/topics.
func (c *Client) CreateTopic(ctx context.Context, req *messages.TopicCreateRequest) (*messages.TopicCreated, error) {
	var res messages.TopicCreated
	return &res, c.do(ctx, http.MethodPost, "/v1/topics", req, &res)
}

// JoinTopic asks POST /v1/topics/join, LeaveTopic /v1/topics/leave: the
// topic's members after the change.
func (c *Client) JoinTopic(ctx context.Context, req *messages.TopicMembershipRequest) (*messages.TopicMembers, error) {
	var res messages.TopicMembers
	return &res, c.do(ctx, http.MethodPost, "/v1/topics/join", req, &res)
}

// LeaveTopic asks POST /v1/topics/leave.
func (c *Client) LeaveTopic(ctx context.Context, req *messages.TopicMembershipRequest) (*messages.TopicMembers, error) {
	var res messages.TopicMembers
	return &res, c.do(ctx, http.MethodPost, "/v1/topics/leave", req, &res)
}

// TopicMembers asks GET /v1/topics/members.
func (c *Client) TopicMembers(ctx context.Context, mesh, topic string) (*messages.TopicMembers, error) {
	var res messages.TopicMembers
	return &res, c.do(ctx, http.MethodGet, "/v1/topics/members"+query("mesh", mesh, "topic", topic), nil, &res)
}

// TopicHistory asks GET /v1/topics/history: at most limit messages (0: the
// broker's default), newest first, older than before when it is set.
func (c *Client) TopicHistory(ctx context.Context, mesh, topic string, limit int, before string) (*messages.TopicHistory, error) {
	l := ""
	if limit > 0 {
		l = strconv.Itoa(limit)
	}
	var res messages.TopicHistory
	return &res, c.do(ctx, http.MethodGet, "/v1/topics/history"+query("mesh", mesh, "topic", topic, "limit", l, "before", before),
		nil, &res)
}

// query renders the non-empty of the name, value pairs as a query string
// ("" when all are empty).
func query(pairs ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			q.Set(pairs[i], pairs[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}
