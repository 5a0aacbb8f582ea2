package integration

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// The daemon's web view driven by a real headless Chromium (Debian's
// chromium; .ci/run installs it), as its user drives it.

// webDeadline bounds one step in the browser.
const webDeadline = 20 * time.Second

// chromium is the browser's path; without one the test fails under CI and
// is skipped elsewhere.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH (apt-get install chromium): the web view's browser test cannot run")
	}
	t.Skip("no chromium on PATH (apt-get install chromium)")
	return ""
}

// browser starts a headless Chromium with a fresh profile; dialogs (an
// alert a hostile text would open) are counted and dismissed.
func browser(t *testing.T) (context.Context, *atomic.Int32) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.WindowSize(1280, 800))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	dialogs := new(atomic.Int32)
	events := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range events {
			if err != nil {
				return
			}
			dialogs.Add(1)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{})
		}
	}()
	return ctx, dialogs
}

// browse runs browser steps within webDeadline.
func browse(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, webDeadline)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("%s: %v\npage text:\n%s", what, err, body)
	}
}

// follow runs a step that loads a page (a link's click, a form's submit)
// and waits until the page has loaded.
func follow(t *testing.T, ctx context.Context, what string, step chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, webDeadline)
	defer cancel()
	if _, err := chromedp.RunResponse(sctx, step); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// value runs one browser action and returns its value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, webDeadline)
	defer cancel()
	v, err := chromedp.Run(sctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// waitText waits until the page's text holds s.
func waitText(s string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](`document.body.innerText.includes(`+jsString(s)+`)`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(webDeadline))
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// call is a protocol command as a step.
func call[P, R any](cmd cdp.Command[P, R], params P) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, cmd, params)
		return err
	})
}

// shots saves a screenshot of the page as it is, at desktop and phone
// width, in dir.
func shots(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	for _, v := range []struct {
		suffix string
		w, h   int64
		mobile bool
	}{{"desktop", 1280, 800, false}, {"phone", 390, 844, true}} {
		browse(t, ctx, "size for "+name, call(emulation.SetDeviceMetricsOverride,
			emulation.SetDeviceMetricsOverrideParams{Width: v.w, Height: v.h, DeviceScaleFactor: 1, Mobile: v.mobile}),
			chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("main")))
		buf := value(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
		if err := os.WriteFile(filepath.Join(dir, name+"-"+v.suffix+".png"), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	browse(t, ctx, "back to desktop", call(emulation.ClearDeviceMetricsOverride, cdp.Empty{}), chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS("main")))
}

// TestWebView: bob's web view in Chromium, signed in with the link
// `claudemesh web --no-open` prints. A DM alice sends (urgent, asking for
// an acknowledgement) appears in bob's inbox page without a reload; bob
// acknowledges it (alice's outbox row records it); bob's daemon restarts
// under the open page, which resumes its stream and shows what arrived
// meanwhile; bob marks the first seen; a dead outbox row is
// requeued through its confirmation page; a reservation and a lock bob
// takes appear on the files page; a search finds the DM; bob writes to
// alice from the compose page; a hostile name and body show as text and open no dialog;
// bob signs out, which ends a copy of his cookie too; a
// wrong cookie, another Origin and another Host are refused. Every page
// is photographed at desktop and phone width (into
// CLAUDEMESH_WEB_SCREENSHOTS when set, as docs/web was made).
func TestWebView(t *testing.T) {
	t.Parallel()
	ctx, dialogs := browser(t)
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	l, err := net.Listen("tcp", "127.0.0.1:0") // a port of bob's own, kept across his daemon's restart
	if err != nil {
		t.Fatal(err)
	}
	bobAddr := l.Addr().String()
	l.Close()
	startBob := func() {
		bob.d = startDaemon(t, bob.env, "--tcp", bobAddr)
		bob.c = unixClient(bob.env.socket())
		t.Cleanup(bob.c.CloseIdleConnections)
		bob.waitConnected(t)
	}
	startBob()
	dir := os.Getenv("CLAUDEMESH_WEB_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}

	r := runCLI(t, bob.env, "web", "--no-open")
	link := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(link, "http://127.0.0.1:") || !strings.Contains(link, "/web/login?code=") {
		t.Fatalf("claudemesh web --no-open: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	base := link[:strings.Index(link, "/web/")]
	browse(t, ctx, "sign in", chromedp.Navigate(link), waitText("Broker links"))
	loc := value(t, ctx, "location", chromedp.Location())
	if loc != base+"/web/" {
		t.Fatalf("after sign-in the browser is at %q, want %s/web/ (the code out of the address bar)", loc, base)
	}
	browse(t, ctx, "alice among the peers", waitText("alice"), waitText("connected"))
	shots(t, ctx, dir, "mesh")

	// A DM from alice appears live: the page is not reloaded (its marker
	// survives).
	const hostile = "<img src=x onerror=alert(1)> hello bob \x1b[31mred"
	browse(t, ctx, "open the inbox", chromedp.Navigate(base+"/web/inbox"), waitText("No message"), waitText("live"))
	value(t, ctx, "mark the page", chromedp.Evaluate[int](`window.__marker = 42`))
	mail, _ := json.Marshal(map[string]any{"to": bob.pubkey, "message": hostile, "client_message_id": "web-dm-1",
		"subject": "Release <b>train</b>", "importance": "urgent", "ack_required": true})
	if res := post(t, alice.c, mail); res.status != http.StatusAccepted {
		t.Fatalf("alice's send: %d %s", res.status, res.body)
	}
	browse(t, ctx, "the DM appears live", waitText("web-dm-1"))
	text := value(t, ctx, "the body", chromedp.Text(chromedp.CSS("li.message .body")))
	if value(t, ctx, "the marker", chromedp.Evaluate[int](`window.__marker || 0`)) != 42 {
		t.Fatal("the inbox page was reloaded to show the message; it should have arrived live")
	}
	if text != "<img src=x onerror=alert(1)> hello bob ␛[31mred" {
		t.Errorf("the message body shows as %q", text)
	}
	shots(t, ctx, dir, "inbox")
	browse(t, ctx, "its header", waitText("Release <b>train</b>"), waitText("urgent"), waitText("acknowledgement asked"))
	follow(t, ctx, "acknowledge it", chromedp.Click(`//button[normalize-space()="Acknowledge"]`))
	browse(t, ctx, "acknowledged", waitText("acknowledged web-dm-1"))
	wait.For(t, e2eDeliverDeadline, "alice's row to record bob's acknowledgement", func() bool {
		var page struct {
			Items []struct {
				AckedBy []struct{ Name string } `json:"acked_by"`
			} `json:"items"`
		}
		st, _, err := getJSON(alice.c, "http://localhost/v1/outbox?client_message_id=web-dm-1", &page)
		return err == nil && st == http.StatusOK && len(page.Items) == 1 && len(page.Items[0].AckedBy) == 1 &&
			page.Items[0].AckedBy[0].Name == "bob"
	})
	// Bob's daemon restarts under the open page: the page says so, and
	// what arrives meanwhile shows once the stream resumes, no reload.
	value(t, ctx, "mark the page again", chromedp.Evaluate[int](`window.__marker = 42`))
	bob.d.stop()
	browse(t, ctx, "the stream down", waitText("reconnecting"))
	if res := post(t, alice.c, sendBody(t, bob.pubkey, "sent while bob's daemon was down", "web-dm-2")); res.status != http.StatusAccepted {
		t.Fatalf("alice's second send: %d %s", res.status, res.body)
	}
	startBob()
	browse(t, ctx, "the stream resumed", waitText("web-dm-2"), waitText("live"))
	if value(t, ctx, "the marker", chromedp.Evaluate[int](`window.__marker || 0`)) != 42 {
		t.Fatal("the inbox page was reloaded across the daemon's restart; it should have resumed its stream")
	}
	browse(t, ctx, "select it", chromedp.Click(chromedp.CSS(`li.message input[type=checkbox]`)))
	follow(t, ctx, "mark it seen", chromedp.Click(`//button[normalize-space()="Mark selected seen"]`))
	browse(t, ctx, "marked seen", waitText("1 message marked seen"), waitText("1 unread message"))

	// A dead row: bob's DM to a key no member holds is refused by the
	// broker for good. Requeue it through its confirmation.
	nobody, _, _ := ed25519.GenerateKey(nil)
	if st, body, err := trySend(bob.c, hex.EncodeToString(nobody), "to nobody", "web-dead-1"); err != nil || st != http.StatusAccepted {
		t.Fatalf("bob's send to nobody: %d %v %s", st, err, body)
	}
	wait.For(t, e2eDeliverDeadline, "bob's row to nobody to be dead", func() bool {
		_, ok := byClientID(listAll(t, bob.c, "dead"))["web-dead-1"]
		return ok
	})
	browse(t, ctx, "the dead row", chromedp.Navigate(base+"/web/outbox?status=dead"), waitText("web-dead-1"))
	shots(t, ctx, dir, "outbox")
	follow(t, ctx, "its confirmation", chromedp.Click(`//a[normalize-space()="Requeue…"]`))
	browse(t, ctx, "the confirmation", waitText("Requeue a message?"))
	shots(t, ctx, dir, "confirm")
	follow(t, ctx, "requeue it", chromedp.Click(chromedp.CSS(`button.danger`)))
	browse(t, ctx, "requeued", waitText("requeued as"))
	if n := len(listAll(t, bob.c, "aborted")); n != 1 {
		t.Errorf("after the requeue bob's outbox has %d aborted rows, want the dead one retired", n)
	}

	// A reservation and a lock bob takes show on the files page as they
	// are granted.
	browse(t, ctx, "the files page", chromedp.Navigate(base+"/web/files"), waitText("No file is reserved"), waitText("No lock is held"))
	repo := t.TempDir()
	gitRun(t, repo, os.Environ(), "init", "-q")
	gitRun(t, repo, os.Environ(), "commit", "-q", "--allow-empty", "-m", "root")
	if r := cliIn(t, repo, bob.env.environ(), "reserve", "src/**", "--ttl", "5m"); r.code != 0 {
		t.Fatalf("reserve: %d %s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, bob.env, "lock", "acquire", "release-train", "--ttl", "5m"); r.code != 0 {
		t.Fatalf("lock acquire: %d %s%s", r.code, r.stdout, r.stderr)
	}
	browse(t, ctx, "the reservation and the lock appear", waitText("src/**"), waitText("exclusive"), waitText("release-train"))
	shots(t, ctx, dir, "files")
	browse(t, ctx, "search", chromedp.Navigate(base+"/web/inbox?q=train"), waitText("best first"), waitText("web-dm-1"))
	browse(t, ctx, "compose", chromedp.Navigate(base+"/web/compose"), waitText("To a peer"))
	shots(t, ctx, dir, "compose")
	browse(t, ctx, "write to alice", chromedp.SetValue(chromedp.ID("to"), "alice"),
		chromedp.SetValue(chromedp.ID("subject"), "from the web"), chromedp.SendKeys(chromedp.ID("message"), "hello from bob's browser"))
	follow(t, ctx, "send it", chromedp.Click(`//button[normalize-space()="Send"]`))
	browse(t, ctx, "sent", waitText("queued for alice"))
	wait.For(t, e2eDeliverDeadline, "alice to have bob's message", func() bool {
		for _, it := range inboxAll(t, alice.c) {
			if it.Body != nil && *it.Body == "hello from bob's browser" && it.SenderName == "bob" {
				return true
			}
		}
		return false
	})
	browse(t, ctx, "dark", call(emulation.SetEmulatedMedia,
		emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}),
		chromedp.Navigate(base+"/web/inbox"), waitText("web-dm-1"))
	shots(t, ctx, dir, "inbox-dark")
	if n := dialogs.Load(); n != 0 {
		t.Errorf("%d dialogs opened: hostile text ran as script", n)
	}

	// Signing out in the browser ends its cookie in every copy of it.
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/web/"}})
	if err != nil || len(cookies.Cookies) != 1 || cookies.Cookies[0].Name != "claudemesh_web" {
		t.Fatalf("the browser's cookies: %+v %v", cookies, err)
	}
	copied := "claudemesh_web=" + cookies.Cookies[0].Value
	withCopy := func() int {
		req, _ := http.NewRequest(http.MethodGet, base+"/web/inbox", nil)
		req.Header.Set("Cookie", copied)
		resp, err := tcpClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := withCopy(); st != http.StatusOK {
		t.Fatalf("a copy of the browser's cookie while it is signed in: %d", st)
	}
	follow(t, ctx, "sign out", chromedp.Click(`//button[normalize-space()="Sign out"]`))
	browse(t, ctx, "signed out", waitText("this browser is signed out"))
	if st := withCopy(); st != http.StatusUnauthorized {
		t.Errorf("a copy of the cookie after the browser signed out: %d, want 401", st)
	}

	// Refusals: a wrong cookie in the browser; another Origin and another
	// Host (which no browser lets a page set) from a plain client.
	browse(t, ctx, "a wrong cookie", call(network.ClearBrowserCookies, cdp.Empty{}), call(network.SetCookie,
		network.SetCookieParams{Name: "claudemesh_web", Value: "forged.9999999999.AAAA", URL: base + "/web/", Path: "/web/"}),
		chromedp.Navigate(base+"/web/inbox"))
	refused := value(t, ctx, "the refusal", chromedp.Text(chromedp.CSS("main")))
	if !strings.Contains(refused, "not signed in") {
		t.Errorf("with a forged cookie the inbox shows %q", refused)
	}
	for _, c := range []struct{ header, value string }{{"Origin", "http://evil.example"}, {"Host", "evil.example"}} {
		req, _ := http.NewRequest(http.MethodGet, base+"/web/inbox", nil)
		if c.header == "Host" {
			req.Host = c.value
		} else {
			req.Header.Set(c.header, c.value)
		}
		resp, err := tcpClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("another %s: %d, want 403", c.header, resp.StatusCode)
		}
	}
	t.Logf("screenshots in %s", dir)
}
