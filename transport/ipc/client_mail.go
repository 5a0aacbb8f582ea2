package ipc

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/claudemesh/claudemesh-go/messages"
)

// AckMessage asks POST /v1/inbox/<id>/ack: the receipt goes to the
// message's sender, and the row is stamped acknowledged.
func (c *Client) AckMessage(ctx context.Context, id string) (*messages.InboxAcked, error) {
	var res messages.InboxAcked
	return &res, c.do(ctx, http.MethodPost, "/v1/inbox/"+url.PathEscape(id)+"/ack", nil, &res)
}

// SearchInbox asks GET /v1/inbox/search: the messages matching query, best
// first, at most limit (the daemon's default when 0).
func (c *Client) SearchInbox(ctx context.Context, query, mesh string, limit int) (*messages.InboxPage, error) {
	q := url.Values{"q": {query}}
	if mesh != "" {
		q.Set("mesh", mesh)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var page messages.InboxPage
	return &page, c.do(ctx, http.MethodGet, "/v1/inbox/search?"+q.Encode(), nil, &page)
}

// Outbox asks GET /v1/outbox for one page (q: the route's parameters).
func (c *Client) Outbox(ctx context.Context, q url.Values) (*messages.OutboxPage, error) {
	var page messages.OutboxPage
	return &page, c.do(ctx, http.MethodGet, "/v1/outbox?"+q.Encode(), nil, &page)
}

// Contacts asks GET /v1/contacts: mesh's contact policy and contacts.
func (c *Client) Contacts(ctx context.Context, mesh string) (*messages.Contacts, error) {
	var res messages.Contacts
	return &res, c.do(ctx, http.MethodGet, "/v1/contacts"+query("mesh", mesh), nil, &res)
}

// SetContactPolicy asks POST /v1/contacts/policy.
func (c *Client) SetContactPolicy(ctx context.Context, req *messages.ContactPolicyRequest) (*messages.Contacts, error) {
	var res messages.Contacts
	return &res, c.do(ctx, http.MethodPost, "/v1/contacts/policy", req, &res)
}

// ContactRequests asks GET /v1/contacts/requests: mesh's pending contact
// requests.
func (c *Client) ContactRequests(ctx context.Context, mesh string) (*messages.ContactRequests, error) {
	var res messages.ContactRequests
	return &res, c.do(ctx, http.MethodGet, "/v1/contacts/requests"+query("mesh", mesh), nil, &res)
}

// DecideContact asks POST /v1/contacts/accept (accept) or
// /v1/contacts/refuse.
func (c *Client) DecideContact(ctx context.Context, req *messages.ContactDecisionRequest, accept bool) (*messages.ContactDecided, error) {
	path := "/v1/contacts/refuse"
	if accept {
		path = "/v1/contacts/accept"
	}
	var res messages.ContactDecided
	return &res, c.do(ctx, http.MethodPost, path, req, &res)
}
