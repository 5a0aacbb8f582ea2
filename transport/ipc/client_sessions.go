package ipc

import (
	"context"
	"net/http"
	"net/url"

	"github.com/claudemesh/claudemesh-go/messages"
)

// RegisterSession asks POST /v1/sessions/register.
func (c *Client) RegisterSession(ctx context.Context, req *messages.RegisterSession) (*messages.SessionRegistered, error) {
	var res messages.SessionRegistered
	return &res, c.do(ctx, http.MethodPost, "/v1/sessions/register", req, &res)
}

// DeregisterSession asks DELETE /v1/sessions/<token>.
func (c *Client) DeregisterSession(ctx context.Context, token string) (*messages.SessionDeregistered, error) {
	var res messages.SessionDeregistered
	return &res, c.do(ctx, http.MethodDelete, "/v1/sessions/"+url.PathEscape(token), nil, &res)
}

// Sessions asks GET /v1/sessions.
func (c *Client) Sessions(ctx context.Context) ([]messages.SessionInfo, error) {
	var res messages.SessionList
	if err := c.do(ctx, http.MethodGet, "/v1/sessions", nil, &res); err != nil {
		return nil, err
	}
	return res.Sessions, nil
}

// SessionMe asks GET /v1/sessions/me: the session this client calls as.
func (c *Client) SessionMe(ctx context.Context) (*messages.SessionInfo, error) {
	var res messages.SessionMe
	if err := c.do(ctx, http.MethodGet, "/v1/sessions/me", nil, &res); err != nil {
		return nil, err
	}
	return &res.Session, nil
}

// MarkSeen asks POST /v1/inbox/seen for the inbox rows ids and returns how
// many flipped from unread to seen.
func (c *Client) MarkSeen(ctx context.Context, ids []string) (int, error) {
	var res messages.InboxMarked
	err := c.do(ctx, http.MethodPost, "/v1/inbox/seen", &messages.InboxSeenRequest{IDs: ids}, &res)
	return res.MarkedSeen, err
}

// SetProfile asks POST /v1/profile.
func (c *Client) SetProfile(ctx context.Context, req *messages.SetProfile) (*messages.ProfileApplied, error) {
	var res messages.ProfileApplied
	return &res, c.do(ctx, http.MethodPost, "/v1/profile", req, &res)
}
