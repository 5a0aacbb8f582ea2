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
)

const tok = "GW8yOZwRycaHHjib6OzTPuXgakItFefRWp_vfJ-wdI8"

// once sends every request once, so that failure cases take no backoff.
var once = &Client{Attempts: 1}

func TestParseInviteURL(t *testing.T) {
	cases := []struct {
		in, join, broker string // broker "" = must fail
	}{
		{"http://127.0.0.1:7900/join/" + tok, "http://127.0.0.1:7900/join/" + tok, "ws://127.0.0.1:7900/ws"},
		{"https://mesh.example/join/" + tok, "https://mesh.example/join/" + tok, "wss://mesh.example/ws"},
		{"https://mesh.example:8443/cm/join/" + tok, "https://mesh.example:8443/cm/join/" + tok, "wss://mesh.example:8443/cm/ws"},
		{"  http://[::1]:7900/join/" + tok + "/\n", "http://[::1]:7900/join/" + tok, "ws://[::1]:7900/ws"},
		{"http://h/join/join/" + tok, "http://h/join/join/" + tok, "ws://h/join/ws"},
		{in: "ws://127.0.0.1:7900/join/" + tok},
		{in: "ftp://h/join/" + tok},
		{in: "127.0.0.1:7900/join/" + tok},
		{in: "/join/" + tok},
		{in: "http:///join/" + tok},
		{in: "http://h/" + tok},
		{in: "http://h/join/"},
		{in: "http://h/join/a/b"},
		{in: "http://h/join/a.b"},
		{in: "http://h/join/" + tok + "?x=1"},
		{in: "http://h/join/" + tok + "#frag"},
		{in: "http://u:p@h/join/" + tok},
		{in: "http://h/join/" + strings.Repeat("a", 257)},
		{in: ""},
		{in: "%zz"},
	}
	for _, tc := range cases {
		inv, err := ParseInviteURL(tc.in)
		if tc.broker == "" {
			if !errors.Is(err, ErrBadInviteURL) {
				t.Errorf("ParseInviteURL(%q) = %+v, %v; want ErrBadInviteURL", tc.in, inv, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseInviteURL(%q): %v", tc.in, err)
			continue
		}
		if inv.JoinURL != tc.join || inv.BrokerURL != tc.broker || !strings.HasSuffix(tc.join, "/"+inv.Token) {
			t.Errorf("ParseInviteURL(%q) = %+v; want join %s broker %s", tc.in, inv, tc.join, tc.broker)
		}
	}
}

func TestInviteURL(t *testing.T) {
	cases := []struct{ base, want string }{
		{"http://127.0.0.1:7900", "http://127.0.0.1:7900/join/" + tok},
		{"http://127.0.0.1:7900/", "http://127.0.0.1:7900/join/" + tok},
		{"https://mesh.example/cm/", "https://mesh.example/cm/join/" + tok},
		{"wss://mesh.example/cm/ws", "https://mesh.example/cm/join/" + tok},
		{"ws://127.0.0.1:7900/ws", "http://127.0.0.1:7900/join/" + tok},
		{base: "ftp://h"},
		{base: "127.0.0.1:7900"},
		{base: "http://h?x=1"},
		{base: "http://u@h"},
		{base: ""},
	}
	for _, tc := range cases {
		got, err := InviteURL(tc.base, tok)
		if tc.want == "" {
			if err == nil {
				t.Errorf("InviteURL(%q) = %s, want an error", tc.base, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("InviteURL(%q) = %s, %v; want %s", tc.base, got, err, tc.want)
			continue
		}
		if _, err := ParseInviteURL(got); err != nil {
			t.Errorf("InviteURL(%q) = %s does not parse back: %v", tc.base, got, err)
		}
	}
	if _, err := InviteURL("http://h", "a/b"); err == nil {
		t.Error("InviteURL accepted a token with a slash")
	}
}

func TestRedeem(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		token := e.invite(t, 1, time.Hour)
		alice := newIdentity(t)
		j, err := Redeem(ctx, e.inviteURL(t, token), alice, "alice")
		if err != nil {
			t.Fatal(err)
		}
		wantWS := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/ws"
		if j.MeshID != e.mesh.ID || j.Slug != "demo" || j.Name != "demo" || j.DisplayName != "alice" || j.BrokerURL != wantWS {
			t.Errorf("Joined %+v; want mesh %s, broker %s", j, e.mesh.ID, wantWS)
		}
		m, err := e.store.MemberByPubkey(ctx, e.mesh.ID, alice.PublicKeyHex())
		if err != nil || m.ID != j.MemberID || m.DisplayName != "alice" {
			t.Errorf("stored member %+v, %v; want id %s", m, err, j.MemberID)
		}
		again, err := Redeem(ctx, e.inviteURL(t, token), alice, "alice")
		if err != nil || *again != *j {
			t.Errorf("retry = %+v, %v; want %+v", again, err, j)
		}

		_, err = Redeem(ctx, e.inviteURL(t, token), newIdentity(t), "bob")
		wantRefusal(t, err, ErrInviteUsedUp, http.StatusGone, token)

		_, err = Redeem(ctx, e.inviteURL(t, strings.Repeat("A", 43)), newIdentity(t), "bob")
		wantRefusal(t, err, ErrInviteUnknown, http.StatusNotFound, token)

		if err := e.store.RevokeMember(ctx, e.mesh.ID, alice.PublicKeyHex()); err != nil {
			t.Fatal(err)
		}
		_, err = Redeem(ctx, e.inviteURL(t, token), alice, "alice")
		wantRefusal(t, err, ErrMemberRevoked, http.StatusForbidden, token)

		late := e.invite(t, 1, time.Minute)
		e.clock.Advance(time.Minute)
		_, err = Redeem(ctx, e.inviteURL(t, late), newIdentity(t), "late")
		wantRefusal(t, err, ErrInviteExpired, http.StatusGone, late)

		_, err = Redeem(ctx, e.inviteURL(t, e.invite(t, 1, time.Hour)), newIdentity(t), " ")
		wantRefusal(t, err, ErrBadRequest, http.StatusBadRequest, "")
	})
}

// wantRefusal checks that err is an *Error matching sentinel with status
// and does not carry token.
func wantRefusal(t *testing.T, err, sentinel error, status int, token string) {
	t.Helper()
	var je *Error
	if !errors.Is(err, sentinel) || !errors.As(err, &je) || je.Status != status {
		t.Errorf("error %v; want %v with HTTP %d", err, sentinel, status)
		return
	}
	if token != "" && strings.Contains(err.Error(), token) {
		t.Errorf("error %q carries the token", err)
	}
}

func TestRedeemTLSAndBasePath(t *testing.T) {
	e := newEnv(t, brokerOptionsSQLite(t))
	mux := http.NewServeMux()
	mux.Handle("/cm/join/", http.StripPrefix("/cm", Handler(e.store, nil)))
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	token := e.invite(t, 1, time.Hour)
	u, err := InviteURL(srv.URL+"/cm", token)
	if err != nil {
		t.Fatal(err)
	}
	j, err := (&Client{HTTP: srv.Client()}).Redeem(context.Background(), u, newIdentity(t), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if want := "wss" + strings.TrimPrefix(srv.URL, "https") + "/cm/ws"; j.BrokerURL != want {
		t.Errorf("BrokerURL %s, want %s", j.BrokerURL, want)
	}
	// Without the server's certificate the broker is unreachable.
	if _, err := Redeem(context.Background(), u, newIdentity(t), "bob"); !errors.Is(err, ErrUnreachable) {
		t.Errorf("untrusted certificate: %v, want ErrUnreachable", err)
	}
}

func TestRedeemAnswers(t *testing.T) {
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
		{name: "redirect", status: 302, ctype: "text/html", header: map[string]string{"Location": "https://elsewhere.example/join/" + tok},
			want: ErrRejected, contain: "https://elsewhere.example/join/…"},
		{name: "500 envelope", status: 500, ctype: "application/json", body: `{"error":"internal","detail":"retry later"}`, want: ErrRejected, contain: "retry later"},
		{name: "400 envelope", status: 400, ctype: "application/json", body: `{"error":"bad_signature","detail":"no"}`, want: ErrBadRequest, contain: "bad_signature"},
		{name: "410 used up", status: 410, ctype: "application/json; charset=utf-8", body: `{"error":"invite_used_up"}`, want: ErrInviteUsedUp},
		{name: "410 expired", status: 410, ctype: "application/json", body: `{"error":"invite_expired"}`, want: ErrInviteExpired},
		{name: "404 unknown", status: 404, ctype: "application/json", body: `{"error":"invite_unknown"}`, want: ErrInviteUnknown},
		{name: "403 revoked", status: 403, ctype: "application/json", body: `{"error":"member_revoked"}`, want: ErrMemberRevoked},
		{name: "200 not ours", status: 200, ctype: "text/html", body: "<html>welcome</html>", want: ErrRejected, contain: "not a claudemesh membership"},
		{name: "200 incomplete", status: 200, ctype: "application/json", body: `{"mesh_id":"m"}`, want: ErrRejected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var followed atomic.Bool
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/join/"+tok {
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
			j, err := once.Redeem(context.Background(), srv.URL+"/join/"+tok, newIdentity(t), "alice")
			if !errors.Is(err, tc.want) {
				t.Fatalf("Redeem = %+v, %v; want %v", j, err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.contain) || strings.Contains(err.Error(), tok) {
				t.Errorf("error %q: want it to contain %q and not the token", err, tc.contain)
			}
			if followed.Load() {
				t.Error("the client followed a redirect")
			}
		})
	}
}

func TestRedeemUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL + "/join/" + tok
	srv.Close()
	_, err := once.Redeem(context.Background(), u, newIdentity(t), "alice")
	if !errors.Is(err, ErrUnreachable) || strings.Contains(err.Error(), tok) {
		t.Errorf("closed server: %v; want ErrUnreachable without the token", err)
	}

	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer slow.Close()
	defer close(hang)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := Redeem(ctx, slow.URL+"/join/"+tok, newIdentity(t), "alice"); !errors.Is(err, ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hanging server: %v; want ErrUnreachable wrapping the deadline", err)
	}

	if _, err := Redeem(context.Background(), "ftp://h/join/"+tok, newIdentity(t), "alice"); !errors.Is(err, ErrBadInviteURL) {
		t.Errorf("bad URL: %v; want ErrBadInviteURL", err)
	}
}

func TestRedeemRetries(t *testing.T) {
	e := newEnv(t, brokerOptionsSQLite(t))
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
	token := e.invite(t, 1, time.Hour)
	alice := newIdentity(t)
	j, err := Redeem(context.Background(), lost.URL+"/join/"+token, alice, "alice")
	if err != nil || calls.Load() != 2 {
		t.Fatalf("Redeem after a lost answer = %+v, %v after %d calls; want success on the second", j, err, calls.Load())
	}
	if m, err := e.store.MemberByPubkey(context.Background(), e.mesh.ID, alice.PublicKeyHex()); err != nil || m.ID != j.MemberID {
		t.Errorf("stored member %+v, %v; want %s", m, err, j.MemberID)
	}

	for _, tc := range []struct {
		status    int
		wantCalls int32
		want      error
	}{
		{http.StatusServiceUnavailable, DefaultAttempts, ErrRejected},
		{http.StatusBadRequest, 1, ErrBadRequest},
		{http.StatusGone, 1, ErrInviteUsedUp},
	} {
		calls.Store(0)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.status)
			code := map[int]string{503: "unavailable", 400: CodeBadSignature, 410: CodeInviteUsedUp}[tc.status]
			io.WriteString(w, `{"error":"`+code+`"}`)
		}))
		_, err := Redeem(context.Background(), srv.URL+"/join/"+tok, newIdentity(t), "alice")
		srv.Close()
		if !errors.Is(err, tc.want) || calls.Load() != tc.wantCalls {
			t.Errorf("HTTP %d: %v after %d calls; want %v after %d", tc.status, err, calls.Load(), tc.want, tc.wantCalls)
		}
	}
}
