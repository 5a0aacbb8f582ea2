package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestSendRefusesAmbiguousJSON: through the daemon's socket, a /v1/send
// body that gives a top-level key twice, has a lone surrogate escape or
// bytes that are not UTF-8 is refused (400 duplicate_key naming the key,
// 400 invalid_unicode) and stores nothing: the client_message_id it
// carried is still free for another request afterwards (202, not 409).
func TestSendRefusesAmbiguousJSON(t *testing.T) {
	e := newEnv(t)
	d := startDaemon(t, e, "--no-tcp")
	defer d.stop()
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	post := func(body string) *response {
		t.Helper()
		return do(t, c, newRequest(t, http.MethodPost, "http://localhost/v1/send", []byte(body)))
	}
	for _, tc := range []struct{ body, code, detail string }{
		{`{"to":"@ops","message":"deploy","to":"@prod","client_message_id":"amb-1"}`, "duplicate_key", `"to"`},
		{`{"to":"@ops","message":"a","Message":"b","client_message_id":"amb-1"}`, "duplicate_key", `"Message"`},
		{`{"to":"@ops","message":"x\ud800y","client_message_id":"amb-1"}`, "invalid_unicode", `\ud800`},
		{`{"to":"@ops","message":"\udc00","client_message_id":"amb-1"}`, "invalid_unicode", `\udc00`},
		{"{\"to\":\"@ops\",\"message\":\"\xed\xa0\x80\",\"client_message_id\":\"amb-1\"}", "invalid_unicode", "UTF-8"},
	} {
		r := post(tc.body)
		var eb struct{ Error, Detail string }
		if json.Unmarshal(r.body, &eb); r.status != http.StatusBadRequest || eb.Error != tc.code || !strings.Contains(eb.Detail, tc.detail) {
			t.Errorf("%q: %d %s, want 400 %s naming %s", tc.body, r.status, r.body, tc.code, tc.detail)
		}
	}
	if r := post(`{"to":"@ops","message":"the one request","client_message_id":"amb-1"}`); r.status != http.StatusAccepted {
		t.Fatalf("amb-1 after the refusals: %d %s, want 202 (nothing was stored under it)", r.status, r.body)
	}
	if r := post(`{"to":"@ops","message":"😀 \ud83d\ude00","client_message_id":"amb-2"}`); r.status != http.StatusAccepted {
		t.Fatalf("a surrogate pair: %d %s", r.status, r.body)
	}
}
