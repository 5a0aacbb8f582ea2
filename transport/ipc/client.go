package ipc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// ErrDaemonNotRunning means nothing answered on the socket.
var ErrDaemonNotRunning = errors.New("daemon not running — start it with `claudemesh daemon up`")

// ErrNoAnswer means the daemon took a request and did not answer it within
// the client's timeout: it is running, but busy or stuck.
var ErrNoAnswer = errors.New("the daemon took the request but did not answer in time (busy or stuck? `claudemesh daemon status` shows its state)")

// Client talks to the daemon over its Unix socket. Non-2xx answers come
// back as *messages.Error with the envelope's code.
//
// A request that has no answer within the client's timeout fails. The
// timeout rides on the request's context, not on http.Client.Timeout:
// for a RoundTripper other than net/http's own, that starts a goroutine
// and a timer per request to enforce it, some 5 % of an MCP server's CPU
// when agents send mail at full speed.
type Client struct {
	hc      *http.Client
	timeout time.Duration
	session string // the calling session's token ("" for none)
}

// requestTimeout is how long a request waits for its answer.
const requestTimeout = 10 * time.Second

// NewClient returns a client for the socket at path.
func NewClient(socketPath string) *Client {
	return NewClientWith(newUnixTransport(socketPath))
}

// NewClientWith returns a client whose requests go through rt: the daemon's
// own web view calls its API in-process this way.
func NewClientWith(rt http.RoundTripper) *Client {
	return &Client{hc: &http.Client{Transport: rt}, timeout: requestTimeout}
}

// AsSession returns a client that calls as the session whose token tok is
// (the Authorization: ClaudeMesh-Session header); "" calls as no session.
func (c *Client) AsSession(tok string) *Client {
	return &Client{hc: c.hc, timeout: c.timeout, session: tok}
}

// within returns the client with a request timeout of d.
func (c *Client) within(d time.Duration) *Client {
	return &Client{hc: c.hc, timeout: d, session: c.session}
}

// exchange does method path with body (nil: none; else JSON) within the
// client's timeout, as the calling session, and returns the answer's
// status and body. A request whose caller gave up fails with the caller's
// reason, a dial that fails otherwise is ErrDaemonNotRunning, and an
// answer that did not come within the timeout says so. idempotencyKey,
// when not empty, goes in the Idempotency-Key header.
func (c *Client) exchange(ctx context.Context, method, path string, body []byte, idempotencyKey string) (int, []byte, error) {
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(rctx, method, "http://localhost"+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	c.authorize(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, unanswered(ctx, method, path, err, c.timeout)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("read daemon answer: %w", err)
	}
	return resp.StatusCode, data, nil
}

// unanswered is the error of a request to the daemon that got no answer
// (err, from the HTTP client): the caller's reason if the caller gave up,
// perhaps while dialling; ErrDaemonNotRunning if nothing took the
// connection; that no answer came within timeout (0: none was set) if
// that ran out; else err.
func unanswered(ctx context.Context, method, path string, err error, timeout time.Duration) error {
	var opErr *net.OpError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("daemon request %s %s: %w", method, path, ctx.Err())
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return ErrDaemonNotRunning
	case timeout > 0 && errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("daemon request %s %s: no answer within %s: %w", method, path, timeout, ErrNoAnswer)
	}
	return fmt.Errorf("daemon request %s %s: %w", method, path, err)
}

// authorize names the calling session on req, if there is one.
func (c *Client) authorize(req *http.Request) {
	if c.session != "" {
		req.Header.Set("Authorization", messages.SessionHeader+" "+c.session)
	}
}

// Version asks GET /v1/version: the handshake that tells a live daemon.
func (c *Client) Version(ctx context.Context) (*messages.Version, error) {
	var v messages.Version
	return &v, c.do(ctx, http.MethodGet, "/v1/version", nil, &v)
}

// Health asks GET /v1/health.
func (c *Client) Health(ctx context.Context) (*messages.Health, error) {
	var h messages.Health
	return &h, c.do(ctx, http.MethodGet, "/v1/health", nil, &h)
}

// ListOutbox asks GET /v1/outbox for one page of at most limit rows.
func (c *Client) ListOutbox(ctx context.Context, status string, limit int, before string) (*messages.OutboxPage, error) {
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	q.Set("limit", strconv.Itoa(limit))
	if before != "" {
		q.Set("before", before)
	}
	var page messages.OutboxPage
	return &page, c.do(ctx, http.MethodGet, "/v1/outbox?"+q.Encode(), nil, &page)
}

// Audit asks GET /v1/audit for the audit entries after seq after, at most
// limit of them (the daemon's default when 0), oldest first.
func (c *Client) Audit(ctx context.Context, after int64, limit int) (*messages.AuditPage, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var page messages.AuditPage
	return &page, c.do(ctx, http.MethodGet, "/v1/audit?"+q.Encode(), nil, &page)
}

// OutboxRowByID asks GET /v1/outbox?id= for the row of that id (nil: there
// is none).
func (c *Client) OutboxRowByID(ctx context.Context, id string) (*messages.OutboxItem, error) {
	return c.outboxRow(ctx, url.Values{"id": {id}}, func(it *messages.OutboxItem) bool { return it.ID == id })
}

// OutboxRow asks GET /v1/outbox for the row of a client_message_id sent on
// mesh (ids are per sender; a session's client names its mesh, which the
// daemon takes for the session's route); nil when there is none.
func (c *Client) OutboxRow(ctx context.Context, mesh, clientMessageID string) (*messages.OutboxItem, error) {
	return c.outboxRow(ctx, url.Values{"client_message_id": {clientMessageID}, "mesh": {mesh}},
		func(it *messages.OutboxItem) bool { return it.ClientMessageID == clientMessageID })
}

// outboxRow is the row of GET /v1/outbox?q that is the one asked for. The
// page is searched, not taken on trust: a daemon that does not know the
// filter (upstream's) answers with its newest rows.
func (c *Client) outboxRow(ctx context.Context, q url.Values, asked func(*messages.OutboxItem) bool) (*messages.OutboxItem, error) {
	var page messages.OutboxPage
	if err := c.do(ctx, http.MethodGet, "/v1/outbox?"+q.Encode(), nil, &page); err != nil {
		return nil, err
	}
	for i := range page.Items {
		if asked(&page.Items[i]) {
			return &page.Items[i], nil
		}
	}
	return nil, nil
}

// Requeue asks POST /v1/outbox/requeue.
func (c *Client) Requeue(ctx context.Context, req *messages.RequeueRequest) (*messages.RequeueResult, error) {
	var res messages.RequeueResult
	return &res, c.do(ctx, http.MethodPost, "/v1/outbox/requeue", req, &res)
}

// Drop asks POST /v1/outbox/drop.
func (c *Client) Drop(ctx context.Context, id string) (*messages.DropResult, error) {
	var res messages.DropResult
	return &res, c.do(ctx, http.MethodPost, "/v1/outbox/drop", &messages.DropRequest{ID: id}, &res)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	data, err := c.raw(ctx, method, path, in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// RotateToken asks POST /v1/token/rotate.
func (c *Client) RotateToken(ctx context.Context) (*messages.TokenRotated, error) {
	var res messages.TokenRotated
	return &res, c.do(ctx, http.MethodPost, "/v1/token/rotate", nil, &res)
}

// Metrics asks GET /v1/metrics and returns the Prometheus text as it came.
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	return c.raw(ctx, http.MethodGet, "/v1/metrics", nil)
}

// raw does a request with in (nil: no body) as JSON and returns the body of
// a 2xx answer; any other answer is a *messages.Error.
func (c *Client) raw(ctx context.Context, method, path string, in any) ([]byte, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return nil, err
		}
	}
	status, data, err := c.exchange(ctx, method, path, body, "")
	if err != nil {
		return nil, err
	}
	if status >= 300 {
		return nil, decodeError(status, data)
	}
	return data, nil
}

// decodeError turns a non-2xx answer into a *messages.Error with the
// envelope's code (http_<status> when the body is not an envelope).
func decodeError(status int, data []byte) error {
	var env messages.ErrorBody
	if json.Unmarshal(data, &env) != nil || env.Error == "" {
		env = messages.ErrorBody{Error: "http_" + strconv.Itoa(status), Detail: string(data)}
	}
	return &messages.Error{Status: status, Code: env.Error, Detail: env.Detail, Candidates: env.Candidates, Attached: env.Attached, State: env.State}
}

// SendResult is a 2xx answer of POST /v1/send: Accepted for 202 (queued or
// inflight), Duplicate for 200 (already accepted by the broker). Body is the
// answer as the daemon wrote it.
type SendResult struct {
	Status    int
	Accepted  *messages.SendAccepted
	Duplicate *messages.SendDuplicate
	Body      []byte
}

// SendConflictError is a 409 answer of POST /v1/send: the client_message_id
// is already bound to another request (or to a row that cannot take this
// one). Body is the answer as the daemon wrote it.
type SendConflictError struct {
	messages.SendConflict
	Body []byte
}

func (e *SendConflictError) Error() string {
	s := fmt.Sprintf("%s: %s (client_message_id %s, daemon fingerprint prefix %s", e.SendConflict.Error,
		e.Conflict, e.ClientMessageID, e.DaemonFingerprintPrefix)
	if e.BrokerMessageID != nil {
		s += ", broker_message_id " + *e.BrokerMessageID
	}
	if e.Reason != nil {
		s += ", reason " + *e.Reason
	}
	return s + ")"
}

// Send asks POST /v1/send. idempotencyKey, when not empty, goes in the
// Idempotency-Key header. A 409 comes back as *SendConflictError, any other
// non-2xx as *messages.Error.
func (c *Client) Send(ctx context.Context, req *messages.SendRequest, idempotencyKey string) (*SendResult, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	status, data, err := c.exchange(ctx, http.MethodPost, "/v1/send", b, idempotencyKey)
	if err != nil {
		return nil, err
	}
	res := &SendResult{Status: status, Body: data}
	switch status {
	case http.StatusAccepted:
		res.Accepted = &messages.SendAccepted{}
		if err := json.Unmarshal(data, res.Accepted); err != nil {
			return nil, fmt.Errorf("daemon answer to POST /v1/send: %w", err)
		}
		return res, nil
	case http.StatusOK:
		res.Duplicate = &messages.SendDuplicate{}
		if err := json.Unmarshal(data, res.Duplicate); err != nil {
			return nil, fmt.Errorf("daemon answer to POST /v1/send: %w", err)
		}
		return res, nil
	case http.StatusConflict:
		ce := &SendConflictError{Body: data}
		if json.Unmarshal(data, &ce.SendConflict) == nil && ce.SendConflict.Error == messages.CodeIdempotencyReused {
			return nil, ce
		}
	}
	return nil, decodeError(status, data)
}

// MeshPeer is one peer of GET /v1/peers: the broker's record and its mesh.
type MeshPeer struct {
	Mesh string `json:"mesh"`
	messages.Peer
}

// PeerNames are the display names of mesh's peers (every mesh's when it
// is empty; a session's client sees its session's) by lower-case pubkey,
// for n lines about to name peers: nil when n is 0, and when the daemon
// cannot list them, since a name is a nicety beside the key the line shows
// instead. It asks GET /v1/peers once, without waiting for a broker
// connection that is down.
func (c *Client) PeerNames(ctx context.Context, mesh string, n int) map[string]string {
	if n == 0 {
		return nil
	}
	peers, err := c.Peers(ctx, mesh)
	if err != nil {
		return nil
	}
	names := make(map[string]string, len(peers))
	for _, p := range peers {
		if p.DisplayName != "" {
			names[strings.ToLower(p.Pubkey)] = p.DisplayName
		}
	}
	return names
}

// Peers asks GET /v1/peers for the connected peers of mesh, or of every
// mesh when mesh is empty (PeersReport: those whose broker did not answer
// are left out).
func (c *Client) Peers(ctx context.Context, mesh string) ([]MeshPeer, error) {
	peers, _, err := c.PeersReport(ctx, mesh)
	return peers, err
}

// PeersReport is Peers with the meshes whose broker connection did not
// answer, each with why (failed: only when mesh is empty; a named mesh
// that fails fails the request).
func (c *Client) PeersReport(ctx context.Context, mesh string) (peers []MeshPeer, failed map[string]string, err error) {
	path := "/v1/peers"
	if mesh != "" {
		path += "?" + url.Values{"mesh": {mesh}}.Encode()
	}
	var body struct {
		Peers  []MeshPeer        `json:"peers"`
		Failed map[string]string `json:"failed"`
	}
	if err := c.do(ctx, http.MethodGet, path, nil, &body); err != nil {
		return nil, nil, err
	}
	return body.Peers, body.Failed, nil
}
