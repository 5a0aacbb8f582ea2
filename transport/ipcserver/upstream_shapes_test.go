package ipcserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// upstreamShapes are the answers of the upstream daemon that
// testdata/upstream-shapes.json quotes from spec/upstream-daemon-notes.md.
type upstreamShapes struct {
	InboxItem map[string]any `json:"inbox_item"`
	InboxSeen map[string]any `json:"inbox_seen"`
}

func loadUpstreamShapes(t *testing.T) *upstreamShapes {
	t.Helper()
	raw, err := os.ReadFile("testdata/upstream-shapes.json")
	if err != nil {
		t.Fatal(err)
	}
	var s upstreamShapes
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// wantUpstreamShape checks that ours carries every member of upstream's
// object, of the same JSON kind (null where upstream's is null); members
// of ours upstream has not (our extensions) may be there too.
func wantUpstreamShape(t *testing.T, what string, ours, upstream map[string]any) {
	t.Helper()
	for k, want := range upstream {
		if got, ok := ours[k]; !ok || fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) {
			t.Errorf("%s: %q is %#v (present: %v); upstream's is %#v", what, k, got, ok, want)
		}
	}
}

// TestInboxItemUpstreamShape: an inbox item, as GET /v1/inbox lists it
// and as its "message" event carries it, has every member of upstream's
// item (upstream-daemon-notes §3.4): topic and reply_to_id are there,
// null, when the message has none, and strings when it has them.
func TestInboxItemUpstreamShape(t *testing.T) {
	h := newHarness(t)
	upstream := loadUpstreamShapes(t).InboxItem
	body, reply := "hi", "hello"
	h.storeInbound(messages.InboxItem{ID: "row-dm", ClientMessageID: "c-1", BrokerMessageID: "bm-1", Mesh: "flexicar",
		Kind: "dm", SenderPubkey: pkA, SenderName: "bob", Body: &body, ReceivedAtMs: time.Now().UnixMilli(),
		RecipientPubkey: pkB, RecipientKind: "member"})
	h.storeInbound(messages.InboxItem{ID: "row-reply", ClientMessageID: "c-2", BrokerMessageID: "bm-2", Mesh: "flexicar",
		Kind: "topic", Topic: "*", SenderPubkey: pkA, SenderName: "bob", Body: &reply, ReceivedAtMs: time.Now().UnixMilli() + 1,
		ReplyToID: "bm-1", RecipientPubkey: pkB, RecipientKind: "member"})

	var page struct {
		Items []map[string]any `json:"items"`
	}
	if resp := h.do(http.MethodGet, "/v1/inbox", "", &page); resp.StatusCode != http.StatusOK || len(page.Items) != 2 {
		t.Fatalf("GET /v1/inbox: %d, %d items", resp.StatusCode, len(page.Items))
	}
	s := h.stream("Last-Event-ID", "0")
	events := [2]map[string]any{}
	for i := range events {
		f := s.next()
		if f.event != "message" || json.Unmarshal([]byte(f.data), &events[i]) != nil {
			t.Fatalf("event %d: %+v", i, f)
		}
	}
	for i, it := range [...]map[string]any{page.Items[0], events[0]} {
		wantUpstreamShape(t, [...]string{"the inbox item of a DM", "the message event of a DM"}[i], it, upstream)
	}
	for i, it := range [...]map[string]any{page.Items[1], events[1]} {
		if it["topic"] != "*" || it["reply_to_id"] != "bm-1" {
			t.Errorf("%s: topic %#v, reply_to_id %#v; want \"*\" and \"bm-1\"",
				[...]string{"the inbox item of a reply to everyone", "its message event"}[i], it["topic"], it["reply_to_id"])
		}
	}
}

// TestInboxSeenEmptyUpstreamShape: POST /v1/inbox/seen with an empty
// list answers 200 and upstream's body (upstream-daemon-notes §3.2),
// marking nothing; ids missing, null or not a list stay refused.
func TestInboxSeenEmptyUpstreamShape(t *testing.T) {
	h := newHarness(t)
	seedInbox(h)
	var answer map[string]any
	if resp := h.do(http.MethodPost, "/v1/inbox/seen", `{"ids":[]}`, &answer); resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/inbox/seen {\"ids\":[]}: %d %v; want 200 as upstream's", resp.StatusCode, answer)
	}
	if want := loadUpstreamShapes(t).InboxSeen; len(answer) != len(want) || answer["marked_seen"] != want["marked_seen"] {
		t.Errorf("answer %v, upstream's %v", answer, want)
	}
	if items, _ := h.inboxPage("/v1/inbox?unread_only=true&limit=1000"); len(items) != 10 {
		t.Errorf("%d unread after an empty mark, want all 10", len(items))
	}
	for _, body := range []string{`{}`, `{"ids":null}`} {
		h.wantError(http.MethodPost, "/v1/inbox/seen", body, http.StatusBadRequest, "invalid_ids")
	}
	h.wantError(http.MethodPost, "/v1/inbox/seen", `{"ids":"row-01"}`, http.StatusBadRequest, messages.CodeInvalidJSON)
}
