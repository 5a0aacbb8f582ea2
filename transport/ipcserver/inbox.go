package ipcserver

import (
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
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

// inboxList answers GET /v1/inbox?since=&topic=&from=&mesh=&limit=&after=
// (and the mail filters thread=, importance= (a comma-separated list),
// unacked=true, and id= for one row), oldest first, with a Link rel="next"
// header carrying the same filters when more rows exist. A session's
// listing first pulls what the broker holds for it (pullHeld).
func (s *Server) inboxList(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q, err := parseInboxQuery(v)
	if err != nil {
		writeError(w, err)
		return
	}
	if sessionOf(r) != nil {
		m, err := s.scope(r, q.Mesh)
		if err != nil {
			writeError(w, err)
			return
		}
		q.Mesh = m.Info.Mesh
		s.pullHeld(q.Mesh)
	}
	if err := s.inboxTopic(q); err != nil {
		writeError(w, err)
		return
	}
	// An agent session's read marks what it read, as upstream; an
	// operator's listing changes nothing unless it asks.
	if q.MarkSeen, err = boolQuery(v, "mark_seen", sessionOf(r) != nil); err != nil {
		writeError(w, err)
		return
	}
	q.Now = now()
	page, err := ask[*messages.InboxPage](s, s.opts.Store, q)
	if err != nil {
		writeError(w, err)
		return
	}
	if page.Items == nil {
		page.Items = []messages.InboxItem{}
	}
	s.nameTopics(page.Items)
	if page.Next != "" {
		next := url.Values{"limit": {strconv.Itoa(q.Limit)}, "after": {page.Next}}
		for _, k := range []string{"since", "topic", "from", "mesh", "unread_only", "mark_seen", "thread", "importance", "unacked", "id"} {
			if x := v.Get(k); x != "" {
				next.Set(k, x)
			}
		}
		w.Header().Set("Link", `</v1/inbox?`+next.Encode()+`>; rel="next"`)
	}
	writeJSON(w, http.StatusOK, page)
}

// pullHeld has a session's broker connection pull what the broker holds
// for it while it is working or dnd (messages.PullHeld), so that its
// listing shows those messages too; the answer comes once they are
// stored. Whatever stops the pull — the link down, a broker without the
// ability, no answer within messages.HeldPullTimeout — leaves the listing
// to what is stored.
func (s *Server) pullHeld(route string) {
	pid, err := s.meshActor(route)
	var pulled *messages.HeldPulled
	if err == nil {
		pulled, err = askWithin[*messages.HeldPulled](s, pid, &messages.PullHeld{}, messages.HeldPullTimeout)
	}
	switch {
	case err != nil:
		s.opts.Log.Debug("held_pull_skipped", "mesh", route, "err", err)
	case pulled.Pushed > 0:
		s.opts.Log.Debug("held_pulled", "mesh", route, "pushed", pulled.Pushed, "more", pulled.More)
	}
}

func parseInboxQuery(v url.Values) (*messages.ListInbox, error) {
	q := &messages.ListInbox{Topic: v.Get("topic"), From: v.Get("from"), Mesh: v.Get("mesh"), After: v.Get("after"),
		Limit: DefaultInboxLimit, Thread: v.Get("thread"), Importance: v.Get("importance"), ID: v.Get("id")}
	if q.Thread != "" && !messages.ValidClientMessageID(q.Thread) {
		return nil, invalidQuery("thread must be a thread id (1-128 printable ASCII characters, no spaces)")
	}
	if q.ID != "" && !messages.ValidClientMessageID(q.ID) {
		return nil, invalidQuery("id must be an inbox row id (the id field of GET /v1/inbox items)")
	}
	for imp := range strings.SplitSeq(q.Importance, ",") {
		if q.Importance != "" && imp != messages.ImportanceNormal && imp != messages.ImportanceHigh && imp != messages.ImportanceUrgent {
			return nil, invalidQuery("importance must be normal, high or urgent, or several of them separated by commas")
		}
	}
	if since := v.Get("since"); since != "" {
		ms, err := parseSince(since)
		if err != nil {
			return nil, err
		}
		q.Since = ms
	}
	var err error
	if q.UnreadOnly, err = boolQuery(v, "unread_only", false); err != nil {
		return nil, err
	}
	if q.Unacked, err = boolQuery(v, "unacked", false); err != nil {
		return nil, err
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

// MaxSeenIDs bounds the ids of one POST /v1/inbox/seen.
const MaxSeenIDs = 1000

// inboxSeen answers POST /v1/inbox/seen {"ids": [...]}: the rows named
// (a session's own only) are stamped seen; marked_seen counts those that
// were unread. An empty list marks nothing and says so, as upstream's
// daemon answers it; a missing (or null) ids is refused.
func (s *Server) inboxSeen(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	defer bufPool.Put(body)
	var req messages.InboxSeenRequest
	if err := messages.DecodeJSON(body.Bytes(), &req); err != nil {
		writeError(w, err)
		return
	}
	if req.IDs == nil || len(req.IDs) > MaxSeenIDs || slices.Contains(req.IDs, "") {
		writeError(w, &messages.Error{Status: http.StatusBadRequest, Code: "invalid_ids",
			Detail: "ids must be a list of at most " + strconv.Itoa(MaxSeenIDs) + " inbox row ids (the id field of GET /v1/inbox items)"})
		return
	}
	if len(req.IDs) == 0 {
		writeJSON(w, http.StatusOK, &messages.InboxMarked{})
		return
	}
	res, err := ask[*messages.InboxChanged](s, s.opts.Store, &messages.MarkInboxSeen{IDs: req.IDs, Mesh: sessionRoute(r), Now: now()})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &messages.InboxMarked{MarkedSeen: int(res.Rows)})
}

// inboxRemoved is the answer of DELETE /v1/inbox[/<id>].
type inboxRemoved struct {
	Removed int64  `json:"removed"`
	ID      string `json:"id,omitempty"`
}

// inboxDeleteOne answers DELETE /v1/inbox/<id> (a session's own rows only).
func (s *Server) inboxDeleteOne(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/v1/inbox/")
	res, err := ask[*messages.InboxChanged](s, s.opts.Store, &messages.DeleteInbox{ID: id, Mesh: sessionRoute(r)})
	if err != nil {
		writeError(w, err)
		return
	}
	if res.Rows == 0 {
		writeError(w, &messages.Error{Status: http.StatusNotFound, Code: "not_found", Detail: "no inbox row " + id})
		return
	}
	writeJSON(w, http.StatusOK, &inboxRemoved{Removed: res.Rows, ID: id})
}

// inboxDelete answers DELETE /v1/inbox?mesh=&before=&all=: the rows of a
// mesh (a session: its own), received before a time. With neither filter
// it deletes nothing unless all=true says every row.
func (s *Server) inboxDelete(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	d := &messages.DeleteInbox{Mesh: v.Get("mesh")}
	if sessionOf(r) != nil {
		m, err := s.scope(r, d.Mesh)
		if err != nil {
			writeError(w, err)
			return
		}
		d.Mesh = m.Info.Mesh
	} else if d.Mesh != "" {
		if _, err := s.mesh(d.Mesh); err != nil {
			writeError(w, err)
			return
		}
	}
	var err error
	if before := v.Get("before"); before != "" {
		if d.Before, err = parseSince(before); err != nil {
			writeError(w, invalidQuery("before must be an RFC 3339 time or Unix milliseconds"))
			return
		}
	}
	if d.All, err = boolQuery(v, "all", false); err != nil {
		writeError(w, err)
		return
	}
	if d.Mesh == "" && d.Before == 0 && !d.All {
		writeError(w, &messages.Error{Status: http.StatusBadRequest, Code: "filter_required",
			Detail: "name mesh= or before=, or pass all=true to delete every inbox row"})
		return
	}
	res, err := ask[*messages.InboxChanged](s, s.opts.Store, d)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &inboxRemoved{Removed: res.Rows})
}
