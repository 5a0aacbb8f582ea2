package ipc

import (
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Paging of GET /v1/inbox (spec §3.8, A23).
const (
	DefaultInboxLimit = 100
	MaxInboxLimit     = 1000
)

// inboxList answers GET /v1/inbox?since=&topic=&from=&mesh=&limit=&after=,
// oldest first, with a Link rel="next" header carrying the same filters when
// more rows exist.
func (s *Server) inboxList(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q, err := parseInboxQuery(v)
	if err != nil {
		writeError(w, err)
		return
	}
	page, err := ask[*messages.InboxPage](s, s.opts.Store, q)
	if err != nil {
		writeError(w, err)
		return
	}
	if page.Items == nil {
		page.Items = []messages.InboxItem{}
	}
	if page.Next != "" {
		next := url.Values{"limit": {strconv.Itoa(q.Limit)}, "after": {page.Next}}
		for _, k := range []string{"since", "topic", "from", "mesh"} {
			if x := v.Get(k); x != "" {
				next.Set(k, x)
			}
		}
		w.Header().Set("Link", `</v1/inbox?`+next.Encode()+`>; rel="next"`)
	}
	writeJSON(w, http.StatusOK, page)
}

func parseInboxQuery(v url.Values) (*messages.ListInbox, error) {
	q := &messages.ListInbox{Topic: v.Get("topic"), From: v.Get("from"), Mesh: v.Get("mesh"), After: v.Get("after"),
		Limit: DefaultInboxLimit}
	if since := v.Get("since"); since != "" {
		ms, err := parseSince(since)
		if err != nil {
			return nil, err
		}
		q.Since = ms
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxInboxLimit {
			return nil, invalidQuery("limit must be an integer from 1 to " + strconv.Itoa(MaxInboxLimit))
		}
		q.Limit = n
	}
	if q.From != "" {
		q.From = strings.ToLower(q.From) // pubkeys are stored in lowercase hex
		if b, err := hex.DecodeString(q.From); err != nil || len(b) != 32 {
			return nil, invalidQuery("from must be a sender pubkey (64 hex characters)")
		}
	}
	return q, nil
}

// parseSince reads since as RFC 3339 (ISO-8601 with a zone) or as Unix
// milliseconds.
func parseSince(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, invalidQuery("since must not be negative")
		}
		return n, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, invalidQuery("since must be an RFC 3339 time (2026-01-02T15:04:05Z) or Unix milliseconds")
	}
	return t.UnixMilli(), nil
}
