package ipc

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Inbox asks GET /v1/inbox for one page (q: since, topic, from, mesh,
// limit, after — the route's parameters).
func (c *Client) Inbox(ctx context.Context, q url.Values) (*messages.InboxPage, error) {
	var page messages.InboxPage
	return &page, c.do(ctx, http.MethodGet, "/v1/inbox?"+q.Encode(), nil, &page)
}

// Event is one server-sent event of GET /v1/events.
type Event struct {
	ID   int64
	Name string
	Data []byte
}

// EventStream reads GET /v1/events until it is closed.
type EventStream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
}

// Events opens GET /v1/events (?mesh= when mesh is set; after > 0 resumes
// after that event id with Last-Event-ID) and returns once the daemon has
// answered, so that nothing published afterwards is missed. It is not bound
// by the client's request timeout; ctx ends it. It fails as a request
// does: ErrDaemonNotRunning only when nothing took the connection, the
// caller's reason when the caller gave up.
func (c *Client) Events(ctx context.Context, mesh string, after int64) (*EventStream, error) {
	path := "http://localhost/v1/events"
	if mesh != "" {
		path += "?" + url.Values{"mesh": {mesh}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	c.authorize(req)
	if after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	resp, err := c.hc.Do(req) // no timeout: the client's rides on exchange's context
	if err != nil {
		return nil, unanswered(ctx, http.MethodGet, "/v1/events", err, 0)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, decodeError(resp.StatusCode, data)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	return &EventStream{body: resp.Body, sc: sc}, nil
}

// Next returns the next event, skipping comments (keepalives); io.EOF when
// the daemon ended the stream.
func (s *EventStream) Next() (Event, error) {
	var ev Event
	var data [][]byte
	for s.sc.Scan() {
		line := s.sc.Bytes()
		switch {
		case len(line) == 0:
			if ev.Name == "" && data == nil {
				continue // the end of a comment
			}
			ev.Data = bytes.Join(data, []byte("\n"))
			return ev, nil
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("id: ")):
			ev.ID, _ = strconv.ParseInt(string(line[4:]), 10, 64)
		case bytes.HasPrefix(line, []byte("event: ")):
			ev.Name = string(line[7:])
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append(data, bytes.Clone(line[6:]))
		}
	}
	if err := s.sc.Err(); err != nil {
		return Event{}, err
	}
	return Event{}, io.EOF
}

// Close ends the stream.
func (s *EventStream) Close() error { return s.body.Close() }
