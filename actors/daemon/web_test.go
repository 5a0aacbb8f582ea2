package daemon_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/actors/daemon"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
	"github.com/claudemesh/claudemesh-go/transport/web"
)

// webDaemon is a daemon on its embedded broker with its loopback TCP
// listener on, and a browser-like client of it: a cookie jar, redirects
// not followed.
type webDaemon struct {
	t       *testing.T
	paths   config.Paths
	api     *ipc.Client
	base    string
	browser *http.Client
}

func startWebDaemon(t *testing.T) *webDaemon {
	t.Helper()
	dir := t.TempDir()
	paths := config.Paths{DaemonDir: filepath.Join(dir, "d"), ConfigDir: filepath.Join(dir, "c")}
	cfg := config.DefaultFile()
	cfg.IPC.TCPEnabled, cfg.IPC.HTTPPort = true, 0
	d, err := daemon.Start(daemon.Options{Paths: paths, Config: cfg, Version: "test", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	jar, _ := cookiejar.New(nil)
	return &webDaemon{t: t, paths: paths, api: ipc.NewClient(paths.Socket()), base: "http://" + d.TCPAddr(),
		browser: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a browser request and returns the status, the body and the
// answer's headers.
func (w *webDaemon) do(method, path string, form url.Values, header ...string) (int, string, http.Header) {
	w.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, w.base+path, body)
	if err != nil {
		w.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := w.browser.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// login signs the browser in through a fresh link and returns the link.
func (w *webDaemon) login() string {
	w.t.Helper()
	l, err := w.api.WebLogin(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	u := strings.TrimPrefix(l.URL, w.base)
	if u == l.URL || !strings.HasPrefix(u, "/web/login?code=") {
		w.t.Fatalf("login link %q is not on %s", l.URL, w.base)
	}
	if st, _, h := w.do(http.MethodGet, u, nil); st != http.StatusSeeOther || h.Get("Location") != "/web/" {
		w.t.Fatalf("login: %d to %q", st, h.Get("Location"))
	}
	return u
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestWebViewSignIn: the pages need the cookie a one-time link gives; the
// link works once; the cookie is HttpOnly, SameSite=Strict and signed
// (tampered: refused); another Host or Origin is refused; every answer
// carries the CSP; assets need no sign-in; the socket serves no page.
func TestWebViewSignIn(t *testing.T) {
	w := startWebDaemon(t)
	if st, body, h := w.do(http.MethodGet, "/web/", nil); st != http.StatusUnauthorized || !strings.Contains(body, "claudemesh web") ||
		!strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("signed out: %d %q %v", st, body, h)
	}
	link := w.login()
	cookies := w.browser.Jar.Cookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(w.base, "http://"), Path: "/web/"})
	if len(cookies) != 1 || cookies[0].Name != web.CookieName {
		t.Fatalf("cookies after sign-in: %v", cookies)
	}
	if st, body, _ := w.do(http.MethodGet, link, nil); st != http.StatusUnauthorized || !strings.Contains(body, "login_code_invalid") {
		t.Fatalf("a link used twice: %d %s", st, body)
	}
	if st, _, _ := w.do(http.MethodGet, "/web/login?code=nonsense", nil); st != http.StatusUnauthorized {
		t.Fatalf("a made-up code: %d", st)
	}
	st, body, h := w.do(http.MethodGet, "/web/", nil)
	if st != http.StatusOK || !strings.Contains(body, "Broker links") || h.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("signed in: %d %s", st, body)
	}
	for _, c := range []struct {
		name   string
		header []string
		status int
	}{
		{"another Host", []string{"Host", "evil.example"}, http.StatusForbidden},
		{"another Origin", []string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{"a tampered cookie", []string{"Cookie", web.CookieName + "=" + cookies[0].Value[:len(cookies[0].Value)-2] + "xx"}, http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(http.MethodGet, w.base+"/web/inbox", nil)
		if c.header[0] == "Host" {
			req.Host = c.header[1]
		} else {
			req.Header.Set(c.header[0], c.header[1])
		}
		client := w.browser
		if c.header[0] == "Cookie" {
			client = http.DefaultClient
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.status)
		}
	}
	if st, body, h := w.do(http.MethodGet, "/web/static/app.js", nil, "Cookie", ""); st != http.StatusOK ||
		!strings.HasPrefix(h.Get("Content-Type"), "text/javascript") || !strings.Contains(body, "EventSource") {
		t.Fatalf("app.js: %d %v", st, h)
	}
	for _, bad := range []string{"/web/static/../templates/layout.html", "/web/static/nope.js", "/web/nope"} {
		if st, _, _ := w.do(http.MethodGet, bad, nil); st != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", bad, st)
		}
	}
}

// TestWebViewHostileText: a session named with markup sends a body with
// markup, terminal escapes and a bidirectional override; the mesh and
// inbox pages show them as text. Marking it seen needs the page's CSRF token and its own Origin.
func TestWebViewHostileText(t *testing.T) {
	w := startWebDaemon(t)
	w.login()
	ctx := context.Background()
	tok := make([]byte, 32)
	rand.Read(tok)
	const name = "<script>alert('name')</script>" // the daemon refuses control characters in a name
	_, err := w.api.RegisterSession(ctx, &messages.RegisterSession{Token: hex.EncodeToString(tok), SessionID: "hostile",
		Mesh: "local", DisplayName: name, PID: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	h, err := w.api.Health(ctx)
	if err != nil || len(h.Meshes) != 1 {
		t.Fatalf("health: %+v %v", h, err)
	}
	body := "<img src=x onerror=alert(1)> \x1b]0;title\x07 \u202eevil"
	session := w.api.AsSession(hex.EncodeToString(tok))
	var sendErr error
	if err := wait.Until(10*time.Second, "a send through the session's connection", func() bool { // it may still be coming up
		_, sendErr = session.Send(ctx, &messages.SendRequest{To: h.Meshes[0].MemberPubkey, Message: &body, ClientMessageID: "hostile-1"}, "")
		return sendErr == nil
	}); err != nil {
		t.Fatalf("%v: %v", err, sendErr)
	}
	var page string
	wait.For(t, 10*time.Second, "the message on the inbox page", func() bool {
		_, page, _ = w.do(http.MethodGet, "/web/inbox", nil)
		return strings.Contains(page, "hostile-1")
	})
	for _, want := range []string{"&lt;img src=x onerror=alert(1)&gt;", "␛]0;title␇", "&lt;U&#43;202E&gt;evil"} {
		if !strings.Contains(page, want) {
			t.Errorf("the inbox page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "<img") || strings.Contains(page, "\x1b") || strings.Contains(page, "\u202e") {
		t.Errorf("the inbox page carries the hostile text raw:\n%s", page)
	}
	_, mesh, _ := w.do(http.MethodGet, "/web/", nil)
	if !strings.Contains(mesh, "&lt;script&gt;alert(&#39;name&#39;)&lt;/script&gt;") || strings.Contains(mesh, "<script>alert") {
		t.Errorf("the mesh page shows the session's name as:\n%s", mesh)
	}

	id := regexp.MustCompile(`name="id" value="([0-9A-Z]+)"`).FindStringSubmatch(page)
	csrf := csrfRe.FindStringSubmatch(page)
	if id == nil || csrf == nil {
		t.Fatalf("no row id or CSRF token in the inbox page:\n%s", page)
	}
	same := []string{"Origin", w.base}
	if st, _, _ := w.do(http.MethodPost, "/web/inbox/seen", url.Values{"id": {id[1]}}, same...); st != http.StatusForbidden {
		t.Errorf("mark seen without the CSRF token: %d", st)
	}
	if st, _, _ := w.do(http.MethodPost, "/web/inbox/seen", url.Values{"id": {id[1]}, "csrf": {csrf[1]}},
		"Origin", "http://evil.example"); st != http.StatusForbidden {
		t.Errorf("mark seen from another origin: %d", st)
	}
	if inbox, err := w.api.Inbox(ctx, url.Values{"unread_only": {"true"}}); err != nil || len(inbox.Items) != 1 {
		t.Fatalf("refused requests changed the inbox: %+v %v", inbox, err)
	}
	st, _, hdr := w.do(http.MethodPost, "/web/inbox/seen", url.Values{"id": {id[1]}, "csrf": {csrf[1]}}, same...)
	if st != http.StatusSeeOther || !strings.Contains(hdr.Get("Location"), "marked+seen") {
		t.Fatalf("mark seen: %d %v", st, hdr)
	}
	if inbox, err := w.api.Inbox(ctx, url.Values{"unread_only": {"true"}}); err != nil || len(inbox.Items) != 0 {
		t.Fatalf("after mark seen: %+v %v", inbox, err)
	}
	if frag := func() string { _, b, _ := w.do(http.MethodGet, "/web/inbox?fragment=1", nil); return b }(); strings.Contains(frag, "<html") ||
		!strings.HasPrefix(frag, "<section") {
		t.Errorf("fragment: %.200s", frag)
	}
}

// TestSessionRegisteredAgain: a session registered again under another
// name (what an agent's hook and then its MCP server may do) replaces the
// first registration at once, keeping its key — also under a new token.
// The subtree of the first is stopped before the second's starts: once,
// the second spawn raced the first's stop ("name exists").
func TestSessionRegisteredAgain(t *testing.T) {
	w := startWebDaemon(t)
	ctx := context.Background()
	var key string
	for i, name := range []string{"first-name", "second-name", "third-name"} {
		tok := make([]byte, 32)
		tok[0] = byte(i / 2) // the third registration comes with a token of its own
		res, err := w.api.RegisterSession(ctx, &messages.RegisterSession{Token: hex.EncodeToString(tok), SessionID: "again",
			Mesh: "local", DisplayName: name, PID: os.Getpid()})
		if err != nil {
			t.Fatalf("register as %s: %v", name, err)
		}
		if key == "" {
			key = res.SessionPubkey
		} else if res.SessionPubkey != key {
			t.Fatalf("register as %s: key %s, want the session's %s", name, res.SessionPubkey, key)
		}
		list, err := w.api.Sessions(ctx)
		if err != nil || len(list) != 1 || list[0].DisplayName != name {
			t.Fatalf("after registering as %s: %+v %v", name, list, err)
		}
	}
}

// TestWebViewInboxPages: an inbox of 10,003 messages of the last week
// shows its true unread count and pages through them InboxShown at a
// time, newest first; a page's links name its rows, so a message that
// arrives meanwhile does not move the page.
func TestWebViewInboxPages(t *testing.T) {
	w := startWebDaemon(t)
	w.login()
	db := sqlx.MustOpen("sqlite", "file:"+w.paths.InboxDB()+"?_pragma=busy_timeout(5000)")
	defer db.Close()
	now := time.Now().UnixMilli()
	add := func(from, to int) {
		tx := db.MustBegin()
		for i := from; i < to; i++ {
			var seen any
			if i < 3 {
				seen = now // the three oldest were read
			}
			tx.MustExec(`INSERT INTO inbox (id, client_message_id, mesh, sender_pubkey, sender_name, body, received_at, seen_at)
				VALUES (?, ?, 'local', ?, 'alice', ?, ?, ?)`, fmt.Sprintf("row-%05d", i), fmt.Sprintf("msg-%05d", i),
				strings.Repeat("a", 64), fmt.Sprint("message ", i), now-int64(20_000-i), seen)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	add(0, 10_003)
	link := regexp.MustCompile(`href="(/web/inbox\?(?:before|after)=[^"]+)" rel="(prev|next)"`)
	type shown struct {
		body         string
		newer, older string
	}
	get := func(path string, want ...string) shown {
		t.Helper()
		st, body, _ := w.do(http.MethodGet, path, nil)
		if st != http.StatusOK {
			t.Fatalf("%s: %d", path, st)
		}
		for _, s := range want {
			if !strings.Contains(body, s) {
				t.Errorf("%s lacks %q", path, s)
			}
		}
		p := shown{body: body}
		for _, m := range link.FindAllStringSubmatch(body, -1) {
			if m[2] == "prev" {
				p.newer = html.UnescapeString(m[1])
			} else {
				p.older = html.UnescapeString(m[1])
			}
		}
		if n := strings.Count(body, `<li class="message`); n != web.InboxShown {
			t.Errorf("%s shows %d messages, want %d", path, n, web.InboxShown)
		}
		return p
	}
	first := get("/web/inbox", "10,000 unread messages", "messages 1–200 of 10,003", "msg-10002", "msg-09803")
	if strings.Contains(first.body, "msg-09802") || first.newer != "" || first.older == "" {
		t.Fatalf("the first page: newer %q, older %q, holds the 201st newest: %v", first.newer, first.older,
			strings.Contains(first.body, "msg-09802"))
	}
	second := get(first.older, "10,000 unread messages", "messages 201–400 of 10,003", "msg-09802", "msg-09603")
	if strings.Contains(second.body, "msg-09803") || second.newer == "" || second.older == "" {
		t.Fatalf("the second page: newer %q, older %q", second.newer, second.older)
	}
	get(second.newer, "messages 1–200 of 10,003", "msg-10002")

	add(10_003, 10_004) // a message arrives: the second page keeps its rows
	get(first.older, "10,001 unread messages", "messages 202–401 of 10,004", "msg-09802", "msg-09603")
	last := get("/web/inbox?before=row-00100", "messages 9,805–10,004 of 10,004", "msg-00000", "msg-00199")
	if last.older != "" || last.newer == "" {
		t.Errorf("the oldest page: newer %q, older %q", last.newer, last.older)
	}
}

// TestWebViewSignOut: a browser's sign-out ends its cookie in every copy
// of it — a page asked with a copy is refused, and an event stream opened
// with a copy ends — and leaves another browser signed in.
func TestWebViewSignOut(t *testing.T) {
	w := startWebDaemon(t)
	w.login()
	u, _ := url.Parse(w.base + "/web/")
	copied := web.CookieName + "=" + w.browser.Jar.Cookies(u)[0].Value
	other := w.anotherBrowser()
	withCopy := func(path string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, w.base+path, nil)
		req.Header.Set("Cookie", copied)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	stream := withCopy("/web/events")
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK || !strings.HasPrefix(stream.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("the event stream with a copy of the cookie: %d %v", stream.StatusCode, stream.Header)
	}
	streamEnded := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, stream.Body); streamEnded <- err }()

	_, page, _ := w.do(http.MethodGet, "/web/", nil)
	csrf := csrfRe.FindStringSubmatch(page)
	if csrf == nil {
		t.Fatalf("no CSRF token on the page:\n%s", page)
	}
	if st, body, _ := w.do(http.MethodPost, "/web/logout", url.Values{"csrf": {csrf[1]}}, "Origin", w.base); st != http.StatusOK ||
		!strings.Contains(body, "signed out") {
		t.Fatalf("sign out: %d %s", st, body)
	}
	select {
	case <-streamEnded:
	case <-time.After(settleWithin):
		t.Error("the event stream of a copy of the signed-out cookie is still open")
	}
	if resp := withCopy("/web/inbox"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a page with a copy of the signed-out cookie: %d, want 401", resp.StatusCode)
	} else {
		resp.Body.Close()
	}
	if st, _, _ := other.do(http.MethodGet, "/web/inbox", nil); st != http.StatusOK {
		t.Errorf("another browser after the sign-out: %d, want 200", st)
	}
}

// anotherBrowser is another browser of w's daemon, signed in.
func (w *webDaemon) anotherBrowser() *webDaemon {
	jar, _ := cookiejar.New(nil)
	other := *w
	other.browser = &http.Client{Jar: jar, CheckRedirect: w.browser.CheckRedirect}
	other.login()
	return &other
}
