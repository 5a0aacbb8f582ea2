package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// unixClient is an HTTP client whose every connection goes to sock.
func unixClient(sock string) *http.Client {
	var dialer net.Dialer
	return &http.Client{
		Timeout: 15 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, "unix", sock)
			},
			MaxIdleConnsPerHost: 64,
		},
	}
}

// tcpClient is a plain HTTP client for the loopback TCP listener.
func tcpClient() *http.Client {
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
}

// getJSON GETs url and decodes a JSON answer into out.
func getJSON(c *http.Client, url string, out any) (int, http.Header, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, resp.Header, err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, resp.Header, fmt.Errorf("decode %s: %w (%q)", url, err, b)
		}
	}
	return resp.StatusCode, resp.Header, nil
}

// response is an answer with its body read.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body as one JSON object, failing the test if it is not.
func (r *response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("status %d: body is not a JSON object: %v: %q", r.status, err, r.body)
	}
	return m
}

// do sends one request and reads the whole answer.
func do(t *testing.T, c *http.Client, req *http.Request) *response {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL, err)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}
}

func newRequest(t *testing.T, method, url string, body []byte) *http.Request {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// sendBody is a /v1/send body.
func sendBody(t *testing.T, to, message, clientID string) []byte {
	t.Helper()
	m := map[string]any{"to": to, "message": message}
	if clientID != "" {
		m["client_message_id"] = clientID
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// post sends body to POST /v1/send over c.
func post(t *testing.T, c *http.Client, body []byte) *response {
	t.Helper()
	return do(t, c, newRequest(t, http.MethodPost, "http://localhost/v1/send", body))
}

// mustSend posts a send and requires 202 queued.
func mustSend(t *testing.T, c *http.Client, to, message, clientID string) {
	t.Helper()
	r := post(t, c, sendBody(t, to, message, clientID))
	if r.status != http.StatusAccepted {
		t.Fatalf("send %s: status %d, want 202: %s", clientID, r.status, r.body)
	}
	if m := r.json(t); m["status"] != "queued" || m["client_message_id"] != clientID {
		t.Fatalf("send %s: body %s, want status queued and the same id", clientID, r.body)
	}
}

// outboxItem is one row of GET /v1/outbox.
type outboxItem = messages.OutboxItem

type outboxPage = messages.OutboxPage

// listPageSize is deliberately small and odd, so that listing a few hundred
// rows walks the keyset cursor across several pages.
const listPageSize = 97

// listAll pages through GET /v1/outbox (optionally one status) and returns
// every row, newest first.
func listAll(t *testing.T, c *http.Client, status string) []outboxItem {
	t.Helper()
	var all []outboxItem
	before := ""
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("GET /v1/outbox never returned a last page")
		}
		url := "http://localhost/v1/outbox?limit=" + strconv.Itoa(listPageSize)
		if status != "" {
			url += "&status=" + status
		}
		if before != "" {
			url += "&before=" + before
		}
		var page outboxPage
		st, _, err := getJSON(c, url, &page)
		if err != nil || st != http.StatusOK {
			t.Fatalf("GET %s: status %d, err %v", url, st, err)
		}
		for i, it := range page.Items {
			if len(all) > 0 && it.ID >= all[len(all)-1].ID {
				t.Fatalf("GET %s: row %s does not come after %s (newest first, no repeats)", url, it.ID, all[len(all)-1].ID)
			}
			all = append(all, page.Items[i])
		}
		if page.Next != "" && (len(page.Items) != listPageSize || page.Next != page.Items[len(page.Items)-1].ID) {
			t.Fatalf("GET %s: next %q after %d items", url, page.Next, len(page.Items))
		}
		if page.Next == "" {
			return all
		}
		before = page.Next
	}
}

// byClientID indexes rows by client_message_id.
func byClientID(items []outboxItem) map[string]outboxItem {
	m := make(map[string]outboxItem, len(items))
	for _, it := range items {
		m[it.ClientMessageID] = it
	}
	return m
}
