package ipcserver

import (
	"net/http"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestProfileFieldLimits: a field over its limit is refused with a 400
// naming the field and the limit, and nothing reaches the mesh's broker
// connection — not even the fields of the same request that were fine.
func TestProfileFieldLimits(t *testing.T) {
	a := &fakeConn{profiles: make(chan *messages.SetProfile, 4)}
	h := newHarness(t, withConns(map[string]*fakeConn{"a": a}))
	big := strings.Repeat("x", 300<<10)
	for _, c := range []struct {
		body, code, detail string
	}{
		{`{"status":"dnd","summary":"` + big + `"}`, messages.CodeProfileFieldTooLong, "summary is 307200 bytes; the limit is 4096 bytes"},
		{`{"mesh":"a","bio":"` + big + `"}`, messages.CodeProfileFieldTooLong, "bio is 307200 bytes; the limit is 4096 bytes"},
		{`{"title":"` + strings.Repeat("t", 257) + `"}`, messages.CodeProfileFieldTooLong, "the limit is 256 bytes"},
		{`{"capabilities":["` + strings.Repeat(`x","`, 32) + `y"]}`, messages.CodeProfileFieldTooLong, "capabilities has 33 entries; the limit is 32"},
		{`{"summary":"a\u001b]0;pwned\u0007"}`, messages.CodeInvalidProfileField, "summary must not contain control characters"},
		{`{"summary":"a","summary":"b"}`, messages.CodeDuplicateKey, `"summary"`},
		{`{"summary":"\udead"}`, messages.CodeInvalidUnicode, `\udead`},
	} {
		var eb messages.ErrorBody
		resp := h.do(http.MethodPost, "/v1/profile", c.body, &eb)
		if resp.StatusCode != http.StatusBadRequest || eb.Error != c.code || !strings.Contains(eb.Detail, c.detail) {
			t.Errorf("%.60s: %d %+v, want 400 %s containing %q", c.body, resp.StatusCode, eb, c.code, c.detail)
		}
	}
	select {
	case m := <-a.profiles:
		t.Fatalf("a refused profile reached the broker connection: %+v", m)
	default:
	}
}
