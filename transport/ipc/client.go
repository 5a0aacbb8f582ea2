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
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// ErrDaemonNotRunning means nothing answered on the socket.
var ErrDaemonNotRunning = errors.New("daemon not running — start it with `claudemesh daemon up`")

// Client talks to the daemon over its Unix socket. Non-2xx answers come
// back as *messages.Error with the envelope's code.
type Client struct {
	hc *http.Client
}

// NewClient returns a client for the socket at path.
func NewClient(socketPath string) *Client {
	dialer := &net.Dialer{Timeout: time.Second}
	return &Client{hc: &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socketPath)
		}},
	}}
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

// Requeue asks POST /v1/outbox/requeue.
func (c *Client) Requeue(ctx context.Context, req *messages.RequeueRequest) (*messages.RequeueResult, error) {
	var res messages.RequeueResult
	return &res, c.do(ctx, http.MethodPost, "/v1/outbox/requeue", req, &res)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://localhost"+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Op == "dial" {
			return ErrDaemonNotRunning
		}
		return fmt.Errorf("daemon request %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read daemon answer: %w", err)
	}
	if resp.StatusCode >= 300 {
		var env messages.ErrorBody
		if json.Unmarshal(data, &env) != nil || env.Error == "" {
			env = messages.ErrorBody{Error: "http_" + strconv.Itoa(resp.StatusCode), Detail: string(data)}
		}
		return &messages.Error{Status: resp.StatusCode, Code: env.Error, Detail: env.Detail}
	}
	return json.Unmarshal(data, out)
}
