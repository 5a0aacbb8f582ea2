// Package web is the daemon's web view: server-rendered pages under /web/
// on the daemon's loopback TCP listener, for the person who runs the
// agents — the mesh (peers, sessions, broker links, nodes), the inbox, the
// outbox and its recovery actions, locks, and a compose box — kept live by
// the daemon's own event stream.
//
// It holds no state of the daemon's: every page is drawn from the daemon's
// API, which it calls in-process as a trusted local client (Options.API),
// so that the pages show exactly what `claudemesh` and `curl` see and every
// action goes through the same validation. It never touches SQLite or an
// actor.
//
// Security is the API's, made to fit a browser:
//   - A browser signs in with a one-time code (NewLogin: `claudemesh web`
//     asks for it over the API, so only who holds the bearer token or the
//     socket gets one; two minutes, one use). GET /web/login?code= swaps it
//     for a cookie and redirects, so no secret stays in the address bar.
//   - The cookie is HttpOnly, SameSite=Strict, path /web/, and signed with
//     the daemon's bearer token (HMAC-SHA256): it dies with a token
//     rotation (after the rotation's grace). Its nonce must also be on the
//     list of signed-in browsers (signedin.go), kept in a file so that it
//     survives a daemon restart: signing out takes it off, which ends the
//     cookie in every copy of it.
//   - The API's gate has checked the Host (loopback only: no DNS
//     rebinding). An Origin other than the page's own is refused, and every
//     state change is a POST carrying a CSRF token derived from the cookie.
//   - html/template escapes every text from the mesh (peer names, bodies),
//     and show() draws control and bidirectional characters as visible
//     symbols, so that a hostile name renders as the text it is.
//   - A Content-Security-Policy allows no inline script and nothing from
//     elsewhere; the one script (static/app.js) and style sheet are
//     embedded in the binary. Framing is refused, and no referrer leaves
//     the origin.
package web

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// Tunables of the web view.
const (
	// LoginTTL is how long a one-time login code may wait for its browser.
	LoginTTL = 2 * time.Minute
	// SessionTTL is how long a signed-in browser stays signed in.
	SessionTTL = 12 * time.Hour
	// CookieName is the session cookie's.
	CookieName = "claudemesh_web"
	// Prefix is the path every page and asset lives under.
	Prefix = "/web"
)

// csp is the Content-Security-Policy of every answer: only the embedded
// script, style sheet and images of this origin; no inline script or
// style, no framing, no form posting elsewhere.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Options configure a View.
type Options struct {
	// API is the daemon's API, served to the view as a trusted local
	// client (no bearer, no Origin), as its Unix socket is.
	API http.Handler
	// Secrets are the bearer tokens in force, current first (a rotated one
	// while its grace lasts): they sign the cookies.
	Secrets func() [][]byte
	// SignedInFile keeps the list of signed-in browsers across restarts
	// ("": in memory only).
	SignedInFile string
	Log          *slog.Logger
	Now          func() time.Time // nil: time.Now
}

// View is the web view's handler.
type View struct {
	opts  Options
	api   *ipc.Client
	pages map[string]*template.Template
	mu    sync.Mutex
	codes map[string]time.Time // one-time login codes and when they expire
	in    *signedIn
}

// New returns the view.
func New(o Options) *View {
	if o.Now == nil {
		o.Now = time.Now
	}
	v := &View{opts: o, api: ipc.NewClientWith(handlerTransport{o.API}), codes: map[string]time.Time{}}
	v.pages = parsePages()
	var err error
	if v.in, err = loadSignedIn(o.SignedInFile); err != nil {
		o.Log.Warn("web_signed_in_unreadable", "err", err)
	}
	return v
}

// NewLogin mints a one-time code and returns the address that signs a
// browser in with it; base is the listener's, "http://127.0.0.1:PORT".
func (v *View) NewLogin(base string) (*messages.WebLogin, error) {
	code, err := randomString(32)
	if err != nil {
		return nil, err
	}
	now := v.opts.Now()
	v.mu.Lock()
	for c, until := range v.codes {
		if !now.Before(until) {
			delete(v.codes, c)
		}
	}
	v.codes[code] = now.Add(LoginTTL)
	v.mu.Unlock()
	return &messages.WebLogin{URL: base + Prefix + "/login?code=" + code,
		ExpiresAt: now.Add(LoginTTL).UTC().Format(time.RFC3339)}, nil
}

// takeCode consumes a login code: true when it was minted and has not
// expired nor been used.
func (v *View) takeCode(code string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for c, until := range v.codes {
		if subtle.ConstantTimeCompare([]byte(c), []byte(code)) == 1 {
			delete(v.codes, c)
			return v.opts.Now().Before(until)
		}
	}
	return false
}

// ServeHTTP answers a path under Prefix. The API's gate has checked the
// Host already.
func (v *View) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // no-referrer would make a form's POST say Origin: null
	h.Set("Cache-Control", "no-store")
	if origin := r.Header.Get("Origin"); origin != "" && origin != "http://"+r.Host {
		v.refuse(w, http.StatusForbidden, "forbidden_origin", "requests from another site are refused")
		return
	}
	path := strings.TrimPrefix(r.URL.Path, Prefix)
	if path == "" { // the cookie's path is /web/: send the browser there
		http.Redirect(w, r, Prefix+"/", http.StatusMovedPermanently)
		return
	}
	if strings.HasPrefix(path, "/static/") && r.Method == http.MethodGet {
		v.static(w, r, strings.TrimPrefix(path, "/static/"))
		return
	}
	if path == "/login" && r.Method == http.MethodGet {
		v.login(w, r)
		return
	}
	sess, ok := v.session(r)
	if !ok {
		v.refuse(w, http.StatusUnauthorized, "unauthorized",
			"this browser is not signed in (or its sign-in expired): run `claudemesh web` and open the link it prints")
		return
	}
	rt, ok := findRoute(r.Method, path)
	if !ok {
		v.refuse(w, http.StatusNotFound, "not_found", "no page "+r.URL.Path)
		return
	}
	if r.Method == http.MethodPost {
		if err := r.ParseForm(); err != nil || !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(sess.csrf)) {
			v.refuse(w, http.StatusForbidden, "csrf", "the form is stale or did not come from this page; reload it and try again")
			return
		}
	}
	rt.handler(v, w, r, sess)
}

// session is a signed-in browser: its cookie's nonce and the CSRF token
// its forms carry.
type session struct {
	nonce string
	csrf  string
}

// session reads and checks the cookie.
func (v *View) session(r *http.Request) (*session, bool) {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return nil, false
	}
	nonce, rest, ok := strings.Cut(c.Value, ".")
	expires, mac, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return nil, false
	}
	until, err := strconv.ParseInt(expires, 10, 64)
	if err != nil || v.opts.Now().Unix() >= until || !v.in.has(nonce, v.opts.Now()) {
		return nil, false
	}
	for _, key := range v.opts.Secrets() {
		if hmac.Equal([]byte(mac), []byte(sign(key, "session", nonce, expires))) {
			return &session{nonce: nonce, csrf: sign(key, "csrf", nonce)}, true
		}
	}
	return nil, false
}

// login swaps a one-time code for the session cookie.
func (v *View) login(w http.ResponseWriter, r *http.Request) {
	if !v.takeCode(r.URL.Query().Get("code")) {
		v.refuse(w, http.StatusUnauthorized, "login_code_invalid",
			"this sign-in link was used already or has expired (links last two minutes): run `claudemesh web` for a new one")
		return
	}
	nonce, err := randomString(16)
	if err != nil {
		v.refuse(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	until := v.opts.Now().Add(SessionTTL).Unix()
	if err := v.in.add(nonce, until, v.opts.Now()); err != nil {
		v.refuse(w, http.StatusInternalServerError, "internal", "the sign-in could not be recorded: "+err.Error())
		return
	}
	expires := strconv.FormatInt(until, 10)
	secrets := v.opts.Secrets()
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: nonce + "." + expires + "." + sign(secrets[0], "session", nonce, expires),
		Path: Prefix + "/", MaxAge: int(SessionTTL.Seconds()), HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
}

// sign is the MAC of parts under key, base64url.
func sign(key []byte, parts ...string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("claudemesh-web"))
	for _, p := range parts {
		m.Write([]byte{0})
		m.Write([]byte(p))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func randomString(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// static serves an embedded asset.
func (v *View) static(w http.ResponseWriter, r *http.Request, name string) {
	data, err := fs.ReadFile(staticFiles, "static/"+name)
	if err != nil || strings.Contains(name, "/") {
		v.refuse(w, http.StatusNotFound, "not_found", "no asset "+name)
		return
	}
	switch {
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	}
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
}

// refuse answers a page of its own for a refusal: what happened and what
// to do, in words.
func (v *View) refuse(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := v.pages["refused"].ExecuteTemplate(w, "refused", map[string]string{"Code": code, "Detail": detail}); err != nil {
		v.opts.Log.Warn("web_render", "page", "refused", "err", err)
	}
}

// errorDetail is what a failed API call says, for a page.
func errorDetail(err error) string {
	var me *messages.Error
	if errors.As(err, &me) {
		return me.Code + ": " + me.Detail
	}
	return err.Error()
}
