package join

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

const tok = "GW8yOZwRycaHHjib6OzTPuXgakItFefRWp_vfJ-wdI8"

// once sends every request once, so that failure cases take no backoff.
var once = &Client{Attempts: 1}

func TestParseLink(t *testing.T) {
	cases := []struct {
		in, token, code string // both "" = must fail
	}{
		{in: "ic://join/" + tok, token: tok},
		{in: "ic://join/" + tok + "/", token: tok},
		{in: "http://127.0.0.1:7900/join/" + tok, token: tok},
		{in: "  https://claudemesh.com/en/join/" + tok + "/\n", token: tok},
		{in: tok, token: tok},
		{in: "https://claudemesh.com/i/AbC12", code: "https://claudemesh.com/api/public/invite-code/AbC12"},
		{in: "https://claudemesh.com/de/i/AbC12/", code: "https://claudemesh.com/api/public/invite-code/AbC12"},
		{in: "http://claudemesh.com/i/AbC12"}, // a short link is https
		{in: "https://claudemesh.com/cm/x/join/" + tok},
		{in: "https://claudemesh.com/EN/join/" + tok},
		{in: "https://u@h/join/" + tok},
		{in: "https://h/join/" + tok + "?x=1"},
		{in: "ws://h/join/" + tok},
		{in: "ic://join/"},
		{in: "ic://join/a.b"},
		{in: "short-token"},
		{in: ""},
	}
	for _, c := range cases {
		l, err := ParseLink(c.in)
		if c.token == "" && c.code == "" {
			if !errors.Is(err, ErrBadInviteLink) {
				t.Errorf("ParseLink(%q) = %+v, %v; want ErrBadInviteLink", c.in, l, err)
			}
			continue
		}
		if err != nil || l.Token != c.token || l.CodeURL != c.code {
			t.Errorf("ParseLink(%q) = %+v, %v; want token %q code %q", c.in, l, err, c.token, c.code)
		}
	}
}

func TestJoinURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"ws://127.0.0.1:7900/ws", "http://127.0.0.1:7900/join"},
		{"wss://mesh.example/ws", "https://mesh.example/join"},
		{"wss://mesh.example/cm/ws", "https://mesh.example/cm/join"},
		{"wss://mesh.example", "https://mesh.example/join"},
		{in: "https://mesh.example/ws"},
		{in: "wss:///ws"},
		{in: "wss://u@h/ws"},
		{in: "wss://h/ws?x=1"},
	} {
		got, err := JoinURL(c.in)
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("JoinURL(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestBrokerURLs(t *testing.T) {
	for _, c := range []struct{ in, ws, origin string }{
		{"http://127.0.0.1:7900", "ws://127.0.0.1:7900/ws", "http://127.0.0.1:7900"},
		{"https://mesh.example/cm/", "wss://mesh.example/cm/ws", "https://mesh.example"},
		{"wss://mesh.example/cm/ws", "wss://mesh.example/cm/ws", "https://mesh.example"},
		{in: "ftp://h"},
		{in: "127.0.0.1:7900"},
		{in: "http://h?x=1"},
		{in: "http://u@h"},
		{in: ""},
	} {
		ws, origin, err := BrokerURLs(c.in)
		if ws != c.ws || origin != c.origin || (err == nil) != (c.ws != "") {
			t.Errorf("BrokerURLs(%q) = %q, %q, %v; want %q, %q", c.in, ws, origin, err, c.ws, c.origin)
		}
		if err == nil {
			if j, err := JoinURL(ws); err != nil || !strings.HasPrefix(j, origin) {
				t.Errorf("JoinURL(%q) = %q, %v; want it under %s", ws, j, err, origin)
			}
		}
	}
}

// TestClientJoin: our client through the real handler and store.
func TestClientJoin(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		c := &Client{Now: e.clock.Now}
		_, origin, err := BrokerURLs(e.srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		inv, err := c.Resolve(ctx, LinkURL(origin, e.invite(t, 1, time.Hour).Token))
		if err != nil {
			t.Fatal(err)
		}
		alice := newIdentity(t)
		j, err := c.Join(ctx, inv, alice, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if j.MeshID != e.mesh.ID || j.Slug != "demo" || j.Name != "demo" || j.Role != "member" || j.BrokerURL != e.wsURL() || j.AlreadyMember {
			t.Errorf("Joined %+v", j)
		}
		if m, err := e.store.MemberByPubkey(ctx, e.mesh.ID, alice.PublicKeyHex()); err != nil || m.ID != j.MemberID {
			t.Errorf("stored member %+v, %v; want %s", m, err, j.MemberID)
		}
		if again, err := c.Join(ctx, inv, alice, "alice"); err != nil || again.MemberID != j.MemberID || !again.AlreadyMember {
			t.Errorf("join again = %+v, %v; want the same member, already a member", again, err)
		}
		if _, err := once.Join(ctx, inv, newIdentity(t), "bob"); !errors.Is(err, ErrInviteUsedUp) {
			t.Errorf("used up: %v", err)
		}
		revoked := e.invite(t, 1, time.Hour)
		if err := e.store.RevokeInvite(ctx, e.mesh.Slug, revoked.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := once.Join(ctx, resolved(t, c, revoked.Token), newIdentity(t), "bob"); !errors.Is(err, ErrInviteRevoked) {
			t.Errorf("revoked: %v", err)
		}
		late := resolved(t, c, e.invite(t, 1, time.Minute).Token)
		e.clock.Advance(time.Minute)
		if _, err := once.Join(ctx, late, newIdentity(t), "bob"); !errors.Is(err, messages.ErrInviteExpired) {
			t.Errorf("expired at the broker: %v", err)
		}
		fresh := resolved(t, c, e.invite(t, 1, time.Hour).Token)
		if _, err := once.Join(ctx, fresh, newIdentity(t), "ALICE"); !errors.Is(err, ErrNameTaken) || !strings.Contains(err.Error(), "not used") {
			t.Errorf("name taken: %v", err)
		}
	})
}

func resolved(t *testing.T, c *Client, token string) *Invite {
	t.Helper()
	inv, err := c.Resolve(context.Background(), token)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// TestClientBasePath: a broker behind a reverse proxy at /cm, over TLS.
func TestClientBasePath(t *testing.T) {
	e := newEnv(t, broker.Options{Dir: t.TempDir()})
	mux := http.NewServeMux()
	mux.Handle("/cm"+Path, http.StripPrefix("/cm", Handler(e.store, nil)))
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	ws, _, err := BrokerURLs(srv.URL + "/cm")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := e.store.CreateInvite(context.Background(), broker.InviteRequest{MeshSlug: "demo", BrokerURL: ws, Uses: 1, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{HTTP: srv.Client(), Now: e.clock.Now}
	checked := resolved(t, c, inv.Token)
	if j, err := c.Join(context.Background(), checked, newIdentity(t), "alice"); err != nil || j.BrokerURL != ws {
		t.Fatalf("Join = %+v, %v; want broker %s", j, err, ws)
	}
	// Without the server's certificate the broker is unreachable.
	if _, err := once.Join(context.Background(), checked, newIdentity(t), "bob"); !errors.Is(err, ErrUnreachable) {
		t.Errorf("untrusted certificate: %v, want ErrUnreachable", err)
	}
}

// TestResolveShortLink: an https://host/i/<code> link is looked up at
// the host, then checked like any other.
func TestResolveShortLink(t *testing.T) {
	v := loadVectors(t)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case CodePath + "good":
			io.WriteString(w, `{"found":true,"token":"`+v.Vectors[0].Token+`"}`)
		case CodePath + "expired":
			io.WriteString(w, `{"found":true,"token":"`+v.Vectors[2].Token+`"}`)
		case CodePath + "gone":
			io.WriteString(w, `{"found":false}`)
		default:
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html>landing page</html>")
		}
	}))
	defer srv.Close()
	c := &Client{HTTP: srv.Client(), Now: func() time.Time { return vectorNow }}
	host := strings.TrimPrefix(srv.URL, "https://")
	for _, tc := range []struct {
		link string
		want error
	}{
		{"https://" + host + "/i/good", nil},
		{"https://" + host + "/en/i/good/", nil},
		{"https://" + host + "/i/expired", messages.ErrInviteExpired},
		{"https://" + host + "/i/gone", ErrInviteCodeUnknown},
		{"https://" + host + "/i/other", ErrRejected},
	} {
		inv, err := c.Resolve(context.Background(), tc.link)
		if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Errorf("Resolve(%s) = %v, want %v", tc.link, err, tc.want)
		} else if err == nil && inv.Token != v.Vectors[0].Token {
			t.Errorf("Resolve(%s) token %.20s…", tc.link, inv.Token)
		}
	}
}

// TestClientAnswers: answers that are not a membership.
func TestClientAnswers(t *testing.T) {
	v := loadVectors(t)
	cases := []struct {
		name    string
		status  int
		ctype   string
		body    string
		header  map[string]string
		want    error
		contain string
	}{
		{name: "proxy 502 html", status: 502, ctype: "text/html", body: "<html>bad gateway</html>", want: ErrRejected, contain: "502"},
		{name: "plain 404", status: 404, ctype: "text/plain", body: "404 page not found", want: ErrRejected, contain: "no claudemesh join endpoint"},
		{name: "redirect", status: 302, ctype: "text/html", header: map[string]string{"Location": "https://elsewhere.example/join"},
			want: ErrRejected, contain: "https://elsewhere.example/join"},
		{name: "500 upstream", status: 500, ctype: "application/json", body: `{"ok":false,"error":"db down"}`, want: ErrRejected, contain: "db down"},
		{name: "400 unknown code", status: 400, ctype: "application/json", body: `{"ok":false,"error":"mesh_not_found"}`, want: ErrBadRequest, contain: "mesh_not_found"},
		{name: "400 exhausted", status: 400, ctype: "application/json; charset=utf-8", body: `{"ok":false,"error":"invite_exhausted"}`, want: ErrInviteUsedUp},
		{name: "400 bad signature", status: 400, ctype: "application/json", body: `{"ok":false,"error":"invite_bad_signature"}`, want: messages.ErrInviteSignature},
		{name: "200 not ours", status: 200, ctype: "text/html", body: "<html>welcome</html>", want: ErrRejected, contain: "not a claudemesh membership"},
		{name: "200 without memberId", status: 200, ctype: "application/json", body: `{"ok":true}`, want: ErrRejected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var followed atomic.Bool
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != Path {
					followed.Store(true)
				}
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", tc.ctype)
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			inv := vectorInviteAt(t, v, srv.URL)
			j, err := once.Join(context.Background(), inv, newIdentity(t), "alice")
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.contain) {
				t.Fatalf("Join = %+v, %v; want %v containing %q", j, err, tc.want, tc.contain)
			}
			if followed.Load() {
				t.Error("the client followed a redirect")
			}
		})
	}
}

// vectorInviteAt is the valid vector's invite, posted to srvURL instead.
func vectorInviteAt(t *testing.T, v *vectors, srvURL string) *Invite {
	t.Helper()
	inv, err := Check(v.Vectors[0].Token, vectorNow)
	if err != nil {
		t.Fatal(err)
	}
	inv.JoinURL = srvURL + Path
	return inv
}

func TestClientUnreachable(t *testing.T) {
	v := loadVectors(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	inv := vectorInviteAt(t, v, srv.URL)
	srv.Close()
	if _, err := once.Join(context.Background(), inv, newIdentity(t), "alice"); !errors.Is(err, ErrUnreachable) || strings.Contains(err.Error(), inv.Token) {
		t.Errorf("closed server: %v; want ErrUnreachable without the token", err)
	}
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer slow.Close()
	defer close(hang)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := once.Join(ctx, vectorInviteAt(t, v, slow.URL), newIdentity(t), "alice"); !errors.Is(err, ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hanging server: %v; want ErrUnreachable wrapping the deadline", err)
	}
}

func TestClientRetries(t *testing.T) {
	e := newEnv(t, broker.Options{Dir: t.TempDir()})
	inner := Handler(e.store, nil)
	var calls atomic.Int32
	// The first answer is lost after the member was committed; the retry
	// must get the same membership without using up the one-use invite.
	lost := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			inner.ServeHTTP(httptest.NewRecorder(), r)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer lost.Close()
	c := &Client{Now: e.clock.Now}
	inv := resolved(t, c, e.invite(t, 1, time.Hour).Token)
	inv.JoinURL = lost.URL + Path
	alice := newIdentity(t)
	j, err := c.Join(context.Background(), inv, alice, "alice")
	if err != nil || calls.Load() != 2 || !j.AlreadyMember {
		t.Fatalf("Join after a lost answer = %+v, %v after %d calls; want success, already a member, on the second", j, err, calls.Load())
	}
	for _, tc := range []struct {
		status    int
		wantCalls int32
		want      error
	}{
		{http.StatusServiceUnavailable, DefaultAttempts, ErrRejected},
		{http.StatusBadRequest, 1, ErrInviteUsedUp},
	} {
		calls.Store(0)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.status)
			io.WriteString(w, `{"ok":false,"error":"`+map[int]string{503: "unavailable", 400: CodeExhausted}[tc.status]+`"}`)
		}))
		inv.JoinURL = srv.URL + Path
		_, err := c.Join(context.Background(), inv, newIdentity(t), "alice")
		srv.Close()
		if !errors.Is(err, tc.want) || calls.Load() != tc.wantCalls {
			t.Errorf("HTTP %d: %v after %d calls; want %v after %d", tc.status, err, calls.Load(), tc.want, tc.wantCalls)
		}
	}
}
