package ipcserver

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestAuditRoute: GET /v1/audit pages the log oldest first with
// next_after, the pages verify as one chain, and bad paging is refused
// with its own code.
func TestAuditRoute(t *testing.T) {
	h := newHarness(t)
	for i, id := range []string{"a", "b", "c"} {
		res, err := h.system.Root.RequestFuture(h.store, &messages.AcceptSend{Mesh: "m", ClientMessageID: id,
			RowID: "01J000000000000000000000A" + strconv.Itoa(i), Payload: []byte(`{}`), Now: time.Now().UnixMilli()},
			5*time.Second).Result()
		if r, ok := res.(*messages.AcceptResult); err != nil || !ok || !r.Inserted {
			t.Fatalf("accept %s: %#v %v", id, res, err)
		}
	}
	var first, rest messages.AuditPage
	if resp := h.do(http.MethodGet, "/v1/audit?limit=2", "", &first); resp.StatusCode != http.StatusOK ||
		len(first.Entries) != 2 || first.NextAfter != 2 || first.Entries[0].Seq != 1 {
		t.Fatalf("first page: %d %+v", resp.StatusCode, first)
	}
	if resp := h.do(http.MethodGet, "/v1/audit?after=2", "", &rest); resp.StatusCode != http.StatusOK ||
		len(rest.Entries) != 1 || rest.NextAfter != 0 || rest.Entries[0].Subject != "c" || rest.Entries[0].Kind != "outbox.accepted" {
		t.Fatalf("last page: %d %+v", resp.StatusCode, rest)
	}
	prev, err := messages.VerifyAudit(nil, first.Entries)
	if err == nil {
		_, err = messages.VerifyAudit(prev, rest.Entries)
	}
	if err != nil {
		t.Fatalf("the pages do not verify: %v", err)
	}
	var empty messages.AuditPage
	if h.do(http.MethodGet, "/v1/audit?after=3", "", &empty); empty.Entries == nil || len(empty.Entries) != 0 {
		t.Errorf("after the last entry: %+v, want entries []", empty)
	}
	for _, q := range []string{"after=-1", "after=x", "after=1.5", "after=99999999999999999999"} {
		h.wantError(http.MethodGet, "/v1/audit?"+q, "", http.StatusBadRequest, messages.CodeInvalidAuditAfter)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=ten", "after=1&limit=-5"} {
		h.wantError(http.MethodGet, "/v1/audit?"+q, "", http.StatusBadRequest, messages.CodeInvalidAuditLimit)
	}
	h.wantError(http.MethodPost, "/v1/audit", "{}", http.StatusMethodNotAllowed, "method_not_allowed")
}

// FuzzParseAuditQuery: any query string is parsed into a page within the
// bounds, or refused with one of the two codes, never anything else.
func FuzzParseAuditQuery(f *testing.F) {
	for _, seed := range []string{"", "after=0&limit=100", "after=18446744073709551615", "limit=1000", "limit=1001",
		"after=-0", "after=+3", "limit=0x10", "after=1&after=x", "limit=%31"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parseAuditQuery(v)
		var e *messages.Error
		switch {
		case err == nil:
			if q.After < 0 || q.Limit < 1 || q.Limit > MaxAuditLimit {
				t.Fatalf("%q parsed out of bounds: %+v", raw, q)
			}
		case !errors.As(err, &e) || e.Status != http.StatusBadRequest ||
			(e.Code != messages.CodeInvalidAuditAfter && e.Code != messages.CodeInvalidAuditLimit):
			t.Fatalf("%q: %v", raw, err)
		}
	})
}
