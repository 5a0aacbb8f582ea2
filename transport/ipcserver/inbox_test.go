package ipcserver

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

var (
	pkA = strings.Repeat("a1", 32)
	pkB = strings.Repeat("b2", 32)
)

// storeInbound inserts an inbox row through the store.
func (h *harness) storeInbound(it messages.InboxItem) {
	h.t.Helper()
	res, err := h.system.Root.RequestFuture(h.store, &messages.StoreInbound{Item: it}, 5*time.Second).Result()
	if err != nil {
		h.t.Fatal(err)
	}
	if r, ok := res.(*messages.InboundStored); !ok || r.Err != nil || !r.Inserted {
		h.t.Fatalf("store inbound %s: %#v", it.ID, res)
	}
}

var linkRe = regexp.MustCompile(`^<(/v1/inbox\?[^>]+)>; rel="next"$`)

// page fetches one inbox page and returns its items and its next link.
func (h *harness) inboxPage(path string) ([]messages.InboxItem, string) {
	h.t.Helper()
	var page messages.InboxPage
	resp := h.do(http.MethodGet, path, "", &page)
	if resp.StatusCode != 200 {
		h.t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	link := resp.Header.Get("Link")
	if link == "" {
		return page.Items, ""
	}
	m := linkRe.FindStringSubmatch(link)
	if m == nil {
		h.t.Fatalf("Link %q", link)
	}
	return page.Items, m[1]
}

// seedInbox stores 10 rows: i = 0..9 received at base+i s, mesh a for
// even i and b for odd, topic "t" for i%3 == 0, from pkA for i < 5.
func seedInbox(h *harness) time.Time {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range 10 {
		body := fmt.Sprintf("hello %d", i)
		it := messages.InboxItem{ID: fmt.Sprintf("row-%02d", i), ClientMessageID: fmt.Sprintf("cm-%d", i),
			Mesh: "a", SenderPubkey: pkA, SenderName: "ann", Body: &body, ReceivedAtMs: base.Add(time.Duration(i) * time.Second).UnixMilli()}
		if i%2 == 1 {
			it.Mesh = "b"
		}
		if i%3 == 0 {
			it.Topic = "t"
		}
		if i >= 5 {
			it.SenderPubkey, it.SenderName = pkB, "bob"
		}
		h.storeInbound(it)
	}
	return base
}

func ids(items []messages.InboxItem) string {
	var s []string
	for _, it := range items {
		s = append(s, strings.TrimPrefix(it.ID, "row-"))
	}
	return strings.Join(s, ",")
}

// follow walks every page from path and checks each Link keeps the filters.
func (h *harness) follow(path string, keep url.Values) string {
	h.t.Helper()
	var all []messages.InboxItem
	for path != "" {
		items, next := h.inboxPage(path)
		all = append(all, items...)
		if next != "" {
			u, _ := url.Parse(next)
			for k, v := range keep {
				if got := u.Query()[k]; len(got) != 1 || got[0] != v[0] {
					h.t.Errorf("Link %s lost %s=%s", next, k, v[0])
				}
			}
			if u.Query().Get("after") == "" {
				h.t.Errorf("Link %s has no after", next)
			}
		}
		path = next
	}
	return ids(all)
}

func TestInboxPagingAndFilters(t *testing.T) {
	h := newHarness(t)
	base := seedInbox(h)
	if got := h.follow("/v1/inbox?limit=3", url.Values{"limit": {"3"}}); got != "00,01,02,03,04,05,06,07,08,09" {
		t.Errorf("all pages: %s", got)
	}
	if items, next := h.inboxPage("/v1/inbox"); len(items) != 10 || next != "" {
		t.Errorf("default limit: %d items, next %q", len(items), next)
	}
	since := base.Add(4 * time.Second)
	for _, c := range []struct {
		query string
		want  string
	}{
		{"mesh=b&limit=2", "01,03,05,07,09"},
		{"topic=t&limit=1", "00,03,06,09"},
		{"from=" + pkB + "&limit=2", "05,06,07,08,09"},
		{"from=" + strings.ToUpper(pkA) + "&mesh=a", "00,02,04"},
		{"since=" + url.QueryEscape(since.Format(time.RFC3339)) + "&limit=2", "04,05,06,07,08,09"},
		{"since=" + fmt.Sprint(since.UnixMilli()) + "&mesh=a&limit=1", "04,06,08"},
		{"since=" + url.QueryEscape(since.Add(500*time.Millisecond).Format(time.RFC3339Nano)) + "&topic=t&limit=1", "06,09"},
		{"mesh=zz", ""},
	} {
		keep, _ := url.ParseQuery(c.query)
		if got := h.follow("/v1/inbox?"+c.query, keep); got != c.want {
			t.Errorf("%s: %s, want %s", c.query, got, c.want)
		}
	}
	var page struct {
		Items []map[string]any `json:"items"`
	}
	h.do(http.MethodGet, "/v1/inbox?topic=t&limit=1", "", &page)
	if len(page.Items) != 1 || page.Items[0]["kind"] != "topic" || page.Items[0]["body"] != "hello 0" ||
		page.Items[0]["received_at"] != "2026-03-01T12:00:00Z" || page.Items[0]["mesh"] != "a" {
		t.Errorf("item %v", page.Items)
	}
}

func TestInboxEmpty(t *testing.T) {
	h := newHarness(t)
	var raw map[string]any
	if resp := h.do(http.MethodGet, "/v1/inbox", "", &raw); resp.StatusCode != 200 || resp.Header.Get("Link") != "" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	if items, ok := raw["items"].([]any); !ok || len(items) != 0 {
		t.Fatalf("items = %#v, want []", raw["items"])
	}
}

func TestInboxBadParams(t *testing.T) {
	h := newHarness(t)
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "since=yesterday", "since=2026-03-01",
		"since=-5", "from=bob", "from=" + pkA[:62], "after=not-a-cursor"} {
		h.wantError(http.MethodGet, "/v1/inbox?"+q, "", http.StatusBadRequest, messages.CodeInvalidQuery)
	}
	h.wantError(http.MethodPost, "/v1/inbox", "{}", http.StatusMethodNotAllowed, "method_not_allowed")
}
