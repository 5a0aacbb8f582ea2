package ipcserver

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestInboxReadStateAndDeletes: unread_only and mark_seen, POST
// /v1/inbox/seen, DELETE /v1/inbox/<id> and DELETE /v1/inbox; every bad
// request is refused with its code and changes nothing.
func TestInboxReadStateAndDeletes(t *testing.T) {
	h := newHarness(t)
	base := seedInbox(h)
	unread := func() int {
		items, _ := h.inboxPage("/v1/inbox?unread_only=true&limit=1000")
		return len(items)
	}
	var page messages.InboxPage
	if h.do(http.MethodGet, "/v1/inbox?unread_only=true", "", &page); len(page.Items) != 10 || page.MarkedSeen != 0 {
		t.Fatalf("an operator's listing marked rows: %d items, marked %d", len(page.Items), page.MarkedSeen)
	}
	page = messages.InboxPage{}
	h.do(http.MethodGet, "/v1/inbox?unread_only=true&mark_seen=true&limit=3", "", &page)
	if len(page.Items) != 3 || page.MarkedSeen != 3 || page.Items[0].SeenAt != nil {
		t.Fatalf("mark_seen=true: %+v", page)
	}
	if n := unread(); n != 7 {
		t.Fatalf("unread after marking 3: %d", n)
	}
	var marked messages.InboxMarked
	if resp := h.do(http.MethodPost, "/v1/inbox/seen", `{"ids":["row-05","row-00","nope"]}`, &marked); resp.StatusCode != 200 || marked.MarkedSeen != 1 {
		t.Fatalf("seen: %d %+v", resp.StatusCode, marked)
	}
	items, _ := h.inboxPage("/v1/inbox?limit=1000")
	if items[0].SeenAt == nil || items[5].SeenAt == nil || items[6].SeenAt != nil {
		t.Fatalf("seen_at: %v %v %v", items[0].SeenAt, items[5].SeenAt, items[6].SeenAt)
	}

	for _, c := range []struct{ method, path, body, code string }{
		{http.MethodPost, "/v1/inbox/seen", `{}`, "invalid_ids"},
		{http.MethodPost, "/v1/inbox/seen", `{"ids":null}`, "invalid_ids"},
		{http.MethodPost, "/v1/inbox/seen", `{"ids":[""]}`, "invalid_ids"},
		{http.MethodPost, "/v1/inbox/seen", `{"ids":"row-06"}`, messages.CodeInvalidJSON},
		{http.MethodPost, "/v1/inbox/seen", `{"ids":["row-06"],"extra":1}`, "unknown_field"},
		{http.MethodGet, "/v1/inbox?unread_only=maybe", "", messages.CodeInvalidQuery},
		{http.MethodGet, "/v1/inbox?mark_seen=2", "", messages.CodeInvalidQuery},
		{http.MethodDelete, "/v1/inbox", "", "filter_required"},
		{http.MethodDelete, "/v1/inbox?all=yes", "", messages.CodeInvalidQuery},
		{http.MethodDelete, "/v1/inbox?before=yesterday", "", messages.CodeInvalidQuery},
		{http.MethodDelete, "/v1/inbox?mesh=nope", "", messages.CodeMeshNotAttached},
	} {
		status := http.StatusBadRequest
		if c.code == messages.CodeMeshNotAttached {
			status = http.StatusNotFound
		}
		h.wantError(c.method, c.path, c.body, status, c.code)
	}
	h.wantError(http.MethodDelete, "/v1/inbox/row-99", "", http.StatusNotFound, "not_found")
	// An id with an escaped '/' is one segment: the row is looked up (and
	// not found), rather than the path read as a route no one serves.
	h.wantError(http.MethodPost, "/v1/inbox/..%2F..%2Frow-01/ack", "", http.StatusNotFound, messages.CodeInboxRowNotFound)
	if n := unread(); n != 6 {
		t.Fatalf("unread after the refused requests: %d, want 6", n)
	}
	if items, _ := h.inboxPage("/v1/inbox?limit=1000"); len(items) != 10 {
		t.Fatalf("rows after the refused requests: %d, want 10", len(items))
	}

	var removed inboxRemoved
	if h.do(http.MethodDelete, "/v1/inbox/row-00", "", &removed); removed.Removed != 1 || removed.ID != "row-00" {
		t.Fatalf("delete one: %+v", removed)
	}
	before := strconv.FormatInt(base.Add(3*time.Second).UnixMilli(), 10)
	if h.do(http.MethodDelete, "/v1/inbox?before="+before, "", &removed); removed.Removed != 2 {
		t.Fatalf("delete before row 3: %+v", removed)
	}
	if h.do(http.MethodDelete, "/v1/inbox?all=true", "", &removed); removed.Removed != 7 {
		t.Fatalf("delete all: %+v", removed)
	}
}
