package web

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// serve is v's answer to a browser's request with cookie ("": none) and
// form (nil: no body).
func serve(v *View, method, path, cookie string, form url.Values) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://127.0.0.1:1"+path, strings.NewReader(form.Encode()))
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	rec := httptest.NewRecorder()
	v.ServeHTTP(rec, req)
	return rec
}

// TestSignInExpiry: a login link expires after LoginTTL, a signed-in
// browser after SessionTTL; a cookie signed with a key no longer in force
// is refused. (The daemon's own tests drive the rest, on a real daemon.)
func TestSignInExpiry(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	keys := [][]byte{[]byte("first")}
	var mu sync.Mutex
	v := New(Options{API: http.NotFoundHandler(), Now: c.now, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Secrets: func() [][]byte { mu.Lock(); defer mu.Unlock(); return keys }})
	get := func(path, cookie string) *httptest.ResponseRecorder {
		return serve(v, http.MethodGet, path, cookie, nil)
	}
	link := func() string {
		l, err := v.NewLogin("http://127.0.0.1:1")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimPrefix(l.URL, "http://127.0.0.1:1")
	}
	stale := link()
	c.add(LoginTTL)
	if rec := get(stale, ""); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a link past LoginTTL: %d", rec.Code)
	}
	rec := get(link(), "")
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("a fresh link: %d", rec.Code)
	}
	cookie := strings.Split(rec.Header().Get("Set-Cookie"), ";")[0]
	if !strings.Contains(rec.Header().Get("Set-Cookie"), "HttpOnly") || !strings.Contains(rec.Header().Get("Set-Cookie"), "SameSite=Strict") {
		t.Fatalf("cookie %q", rec.Header().Get("Set-Cookie"))
	}
	if rec := get("/web/compose", cookie); rec.Code != http.StatusOK {
		t.Fatalf("signed in: %d", rec.Code)
	}
	mu.Lock()
	keys = [][]byte{[]byte("second"), []byte("first")} // a rotation, within its grace
	mu.Unlock()
	if rec := get("/web/compose", cookie); rec.Code != http.StatusOK {
		t.Fatalf("during the rotation's grace: %d", rec.Code)
	}
	c.add(SessionTTL - time.Second)
	if rec := get("/web/compose", cookie); rec.Code != http.StatusOK {
		t.Fatalf("just before SessionTTL: %d", rec.Code)
	}
	mu.Lock()
	keys = [][]byte{[]byte("second")} // the grace ended
	mu.Unlock()
	if rec := get("/web/compose", cookie); rec.Code != http.StatusUnauthorized {
		t.Fatalf("signed with a retired token: %d", rec.Code)
	}
	mu.Lock()
	keys = [][]byte{[]byte("first")}
	mu.Unlock()
	c.add(time.Second)
	if rec := get("/web/compose", cookie); rec.Code != http.StatusUnauthorized {
		t.Fatalf("past SessionTTL: %d", rec.Code)
	}
}

// TestShow: what show draws of hostile text.
func TestShow(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcode":         "plain text, ünïcode",
		"line\nand\ttab":              "line\nand\ttab",
		"\x1b[31mred\x1b[0m":          "␛[31mred␛[0m",
		"bell\x07 del\x7f nul\x00":    "bell␇ del␡ nul␀",
		"c1 \u009b31m":                "c1 <U+009B>31m",
		"\u202eevil\u2066x\u2069":     "<U+202E>evil<U+2066>x<U+2069>",
		"bad \xff utf8":               "bad \uFFFD utf8",
		"<script>alert(1)</script>":   "<script>alert(1)</script>", // html/template escapes it
		"zero\u200ewidth mark\u200f.": "zero<U+200E>width mark<U+200F>.",
	} {
		if got := show(in); got != want {
			t.Errorf("show(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzSessionCookie: no cookie value the fuzzer makes is taken for a
// signed-in browser (it would need the token's MAC), nor panics.
func FuzzSessionCookie(f *testing.F) {
	f.Add("kcUo_h6gnFXTzMUZyOdxGQ.1795938234.HRv5AAc86HlS1xxCKMVrDBcGXwdrlc5DdSDzK-1Ln2U")
	f.Add("..")
	f.Add("a.99999999999999999999999.b")
	f.Add("nonce.-1.mac")
	f.Add("")
	v := New(Options{API: http.NotFoundHandler(), Secrets: func() [][]byte { return [][]byte{[]byte("token")} },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	f.Fuzz(func(t *testing.T, value string) {
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:1/web/", nil)
		req.AddCookie(&http.Cookie{Name: CookieName, Value: value})
		if _, ok := v.session(req); ok {
			t.Fatalf("cookie %q taken as signed in", value)
		}
	})
}

// TestSignOut: signing out ends the browser's cookie in every copy of it,
// also after a restart (a new View on the same list); another browser
// stays signed in, and so does a signed-in browser across a restart.
func TestSignOut(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	file := filepath.Join(t.TempDir(), "web-signed-in.json")
	view := func() *View {
		return New(Options{API: http.NotFoundHandler(), Now: c.now, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Secrets: func() [][]byte { return [][]byte{[]byte("token")} }, SignedInFile: file})
	}
	v := view()
	signIn := func() string {
		l, err := v.NewLogin("http://127.0.0.1:1")
		if err != nil {
			t.Fatal(err)
		}
		rec := serve(v, http.MethodGet, strings.TrimPrefix(l.URL, "http://127.0.0.1:1"), "", nil)
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("sign in: %d", rec.Code)
		}
		return strings.Split(rec.Header().Get("Set-Cookie"), ";")[0]
	}
	copied, other := signIn(), signIn()
	page := serve(v, http.MethodGet, "/web/compose", copied, nil)
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page.Body.String())
	if page.Code != http.StatusOK || csrf == nil {
		t.Fatalf("signed in: %d, no CSRF token:\n%s", page.Code, page.Body)
	}
	if rec := serve(v, http.MethodPost, "/web/logout", copied, url.Values{"csrf": {csrf[1]}}); rec.Code != http.StatusOK ||
		!strings.Contains(rec.Header().Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("sign out: %d %v", rec.Code, rec.Header())
	}
	for _, restarted := range []bool{false, true} {
		if restarted {
			v = view()
		}
		if rec := serve(v, http.MethodGet, "/web/compose", copied, nil); rec.Code != http.StatusUnauthorized {
			t.Errorf("a copy of the signed-out cookie (restarted %v): %d, want 401", restarted, rec.Code)
		}
		if rec := serve(v, http.MethodGet, "/web/compose", other, nil); rec.Code != http.StatusOK {
			t.Errorf("another browser's cookie (restarted %v): %d, want 200", restarted, rec.Code)
		}
	}
	c.add(SessionTTL)
	signIn() // its save drops the expired sign-ins
	b, err := os.ReadFile(file)
	var list signedInFile
	if err != nil || json.Unmarshal(b, &list) != nil || len(list.Nonces) != 1 {
		t.Errorf("the list after the others expired: %s %v; want the one sign-in", b, err)
	}
}

// TestCount: counts with their thousands apart.
func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 10_003: "10,003", 123_456: "123,456",
		1_234_567: "1,234,567"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestInboxPageDrawsTopicAndReply: the inbox page draws a message's topic
// and the message it answers, as GET /v1/inbox gives them (null when a
// message has none).
func TestInboxPageDrawsTopicAndReply(t *testing.T) {
	now := time.Now().UTC()
	item := func(id, topic, replyTo string) map[string]any {
		return map[string]any{"id": id, "client_message_id": "c-" + id, "mesh": "demo", "kind": map[bool]string{true: "dm", false: "topic"}[topic == ""],
			"topic": map[bool]any{true: nil, false: topic}[topic == ""], "reply_to_id": map[bool]any{true: nil, false: replyTo}[replyTo == ""],
			"sender_pubkey": "a1", "sender_name": "ann", "body": "text of " + id, "received_at": now.Format(time.RFC3339Nano), "seen_at": nil}
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/inbox" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"items": []any{item("m1", "", ""), item("m2", "builds", "c-m1")}, "marked_seen": 0})
	})
	v := New(Options{API: api, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Secrets: func() [][]byte { return [][]byte{[]byte("token")} }})
	l, err := v.NewLogin("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	cookie := strings.Split(serve(v, http.MethodGet, strings.TrimPrefix(l.URL, "http://127.0.0.1:1"), "", nil).Header().Get("Set-Cookie"), ";")[0]
	rec := serve(v, http.MethodGet, "/web/inbox", cookie, nil)
	body := rec.Body.String()
	for _, want := range []string{"text of m1", "#builds", "reply to <code>c-m1</code>", "text of m2"} {
		if rec.Code != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("inbox page: %d, no %q in\n%s", rec.Code, want, body)
		}
	}
}
