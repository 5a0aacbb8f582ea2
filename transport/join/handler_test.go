package join

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// signedBody is a join request for token signed by id.
func signedBody(id *meshcrypto.Identity, token, name string) string {
	pub := id.PublicKeyHex()
	b, _ := json.Marshal(Request{Pubkey: pub, DisplayName: name,
		Signature: hex.EncodeToString(id.Sign(SignatureMessage(token, pub)))})
	return string(b)
}

// answer is one HTTP answer of the handler.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a *answer) errorBody(t *testing.T) ErrorBody {
	t.Helper()
	var eb ErrorBody
	if err := json.Unmarshal(a.body, &eb); err != nil {
		t.Fatalf("error body %q: %v", a.body, err)
	}
	return eb
}

func (a *answer) response(t *testing.T) Response {
	t.Helper()
	if a.status != http.StatusOK {
		t.Fatalf("status %d, body %s", a.status, a.body)
	}
	var r Response
	dec := json.NewDecoder(strings.NewReader(string(a.body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("response %q: %v", a.body, err)
	}
	return r
}

// send makes a request to the env's server. A body reader that is not a
// *strings.Reader is sent chunked (no Content-Length).
func (e *env) send(t *testing.T, method, path string, body io.Reader) *answer {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: b}
}

func (e *env) post(t *testing.T, token, body string) *answer {
	t.Helper()
	return e.send(t, http.MethodPost, "/join/"+token, strings.NewReader(body))
}

func (e *env) memberCount(t *testing.T) int {
	t.Helper()
	members, err := e.store.Members(context.Background(), e.mesh.ID)
	if err != nil {
		t.Fatal(err)
	}
	return len(members)
}

// chunked hides a reader's length so the request goes out without a
// Content-Length.
type chunked struct{ io.Reader }

func TestHandlerRequests(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		alice, mallory := newIdentity(t), newIdentity(t)
		smallOrder := "01" + strings.Repeat("00", 31) // the identity point
		cases := []struct {
			name   string
			method string
			path   func(token string) string
			body   func(token string) io.Reader
			status int
			code   string
		}{
			{name: "success", body: func(tok string) io.Reader { return strings.NewReader(signedBody(alice, tok, "alice")) },
				status: 200},
			{name: "signed by another key", body: func(tok string) io.Reader {
				b := signedBody(mallory, tok, "alice")
				return strings.NewReader(strings.Replace(b, mallory.PublicKeyHex(), alice.PublicKeyHex(), 1))
			}, status: 400, code: CodeBadSignature},
			{name: "signature over another token", body: func(string) io.Reader {
				return strings.NewReader(signedBody(alice, "another-token", "alice"))
			}, status: 400, code: CodeBadSignature},
			{name: "malformed signature", body: func(tok string) io.Reader {
				return strings.NewReader(`{"pubkey":"` + alice.PublicKeyHex() + `","display_name":"alice","signature":"zz"}`)
			}, status: 400, code: CodeBadSignature},
			{name: "missing signature", body: func(tok string) io.Reader {
				return strings.NewReader(`{"pubkey":"` + alice.PublicKeyHex() + `","display_name":"alice"}`)
			}, status: 400, code: CodeBadSignature},
			{name: "pubkey not hex", body: func(tok string) io.Reader {
				return strings.NewReader(`{"pubkey":"xyz","display_name":"alice","signature":"00"}`)
			}, status: 400, code: CodeInvalidPubkey},
			{name: "pubkey 63 hex", body: func(tok string) io.Reader {
				return strings.NewReader(`{"pubkey":"` + alice.PublicKeyHex()[1:] + `","display_name":"alice","signature":"00"}`)
			}, status: 400, code: CodeInvalidPubkey},
			{name: "pubkey small order", body: func(tok string) io.Reader {
				return strings.NewReader(`{"pubkey":"` + smallOrder + `","display_name":"alice","signature":"00"}`)
			}, status: 400, code: CodeInvalidPubkey},
			{name: "empty display name", body: func(tok string) io.Reader { return strings.NewReader(signedBody(alice, tok, "  ")) },
				status: 400, code: CodeInvalidDisplayName},
			{name: "display name too long", body: func(tok string) io.Reader {
				return strings.NewReader(signedBody(alice, tok, strings.Repeat("a", MaxDisplayNameBytes+1)))
			}, status: 400, code: CodeInvalidDisplayName},
			{name: "unknown field", body: func(tok string) io.Reader {
				b := signedBody(alice, tok, "alice")
				return strings.NewReader(strings.TrimSuffix(b, "}") + `,"role":"owner"}`)
			}, status: 400, code: CodeInvalidJSON},
			{name: "trailing data", body: func(tok string) io.Reader {
				return strings.NewReader(signedBody(alice, tok, "alice") + `{}`)
			}, status: 400, code: CodeInvalidJSON},
			{name: "not JSON", body: func(string) io.Reader { return strings.NewReader("pubkey=abc") },
				status: 400, code: CodeInvalidJSON},
			{name: "empty body", body: func(string) io.Reader { return strings.NewReader("") },
				status: 400, code: CodeInvalidJSON},
			{name: "oversize body", body: func(tok string) io.Reader {
				return strings.NewReader(`{"display_name":"` + strings.Repeat("a", MaxRequestBytes) + `"}`)
			}, status: 413, code: CodeBodyTooLarge},
			{name: "oversize body chunked", body: func(tok string) io.Reader {
				return chunked{strings.NewReader(`{"display_name":"` + strings.Repeat("a", MaxRequestBytes) + `"}`)}
			}, status: 413, code: CodeBodyTooLarge},
			{name: "unknown token", path: func(string) string { return "/join/" + strings.Repeat("A", 43) },
				body: func(string) io.Reader {
					return strings.NewReader(signedBody(alice, strings.Repeat("A", 43), "alice"))
				}, status: 404, code: CodeInviteUnknown},
			{name: "token not base64url", path: func(string) string { return "/join/a.b" },
				body:   func(string) io.Reader { return strings.NewReader(signedBody(alice, "a.b", "alice")) },
				status: 404, code: CodeInviteUnknown},
			{name: "GET", method: http.MethodGet, status: 405, code: CodeMethodNotAllowed},
			{name: "PUT", method: http.MethodPut, status: 405, code: CodeMethodNotAllowed},
			{name: "no token", path: func(string) string { return "/join/" }, status: 404, code: CodeNotFound},
			{name: "extra segment", path: func(tok string) string { return "/join/" + tok + "/x" }, status: 404, code: CodeNotFound},
			{name: "other path", path: func(string) string { return "/ws" }, status: 404, code: CodeNotFound},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				token := e.invite(t, 1, time.Hour)
				method, path, body := http.MethodPost, "/join/"+token, io.Reader(http.NoBody)
				if tc.method != "" {
					method = tc.method
				}
				if tc.path != nil {
					path = tc.path(token)
				}
				if tc.body != nil {
					body = tc.body(token)
				}
				before := e.memberCount(t)
				a := e.send(t, method, path, body)
				if a.status != tc.status {
					t.Fatalf("status %d, want %d; body %s", a.status, tc.status, a.body)
				}
				if tc.status == http.StatusOK {
					r := a.response(t)
					if r.MeshID != e.mesh.ID || r.Slug != "demo" || r.Name != "demo" || r.DisplayName != "alice" || r.MemberID == "" {
						t.Errorf("response %+v", r)
					}
					m, err := e.store.MemberByPubkey(context.Background(), e.mesh.ID, alice.PublicKeyHex())
					if err != nil || m.ID != r.MemberID {
						t.Errorf("stored member %+v, %v; want id %s", m, err, r.MemberID)
					}
					return
				}
				if eb := a.errorBody(t); eb.Error != tc.code || eb.Detail == "" {
					t.Errorf("error body %+v, want code %s with a detail", eb, tc.code)
				}
				if tc.status == http.StatusMethodNotAllowed && a.header.Get("Allow") != http.MethodPost {
					t.Errorf("Allow %q, want POST", a.header.Get("Allow"))
				}
				if after := e.memberCount(t); after != before {
					t.Errorf("a refused request changed the member count from %d to %d", before, after)
				}
			})
		}
		if strings.Contains(e.logs.String(), "/join/") {
			t.Errorf("the handler logged a path:\n%s", e.logs)
		}
	})
}

func TestHandlerRetryAndUsedUp(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		token := e.invite(t, 1, time.Hour)
		alice, bob := newIdentity(t), newIdentity(t)
		first := e.post(t, token, signedBody(alice, token, "alice")).response(t)
		again := e.post(t, token, signedBody(alice, token, "alice again")).response(t)
		if again != first {
			t.Errorf("retry answered %+v, want the first answer %+v", again, first)
		}
		a := e.post(t, token, signedBody(bob, token, "bob"))
		if a.status != http.StatusGone || a.errorBody(t).Error != CodeInviteUsedUp {
			t.Fatalf("second key: %d %s, want 410 invite_used_up", a.status, a.body)
		}
		members, err := e.store.Members(context.Background(), e.mesh.ID)
		if err != nil || len(members) != 1 || members[0].Pubkey != alice.PublicKeyHex() {
			t.Errorf("members %+v, %v; want alice only", members, err)
		}
		if logs := e.logs.String(); strings.Contains(logs, token) || !strings.Contains(logs, "member_joined") {
			t.Errorf("logs hold the token or lack member_joined:\n%s", logs)
		}
	})
}

func TestHandlerExpired(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		token := e.invite(t, 5, time.Hour)
		e.clock.Advance(time.Hour)
		a := e.post(t, token, signedBody(newIdentity(t), token, "late"))
		if a.status != http.StatusGone || a.errorBody(t).Error != CodeInviteExpired {
			t.Fatalf("expired invite: %d %s, want 410 invite_expired", a.status, a.body)
		}
	})
}

func TestHandlerRevoked(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		token := e.invite(t, 5, time.Hour)
		alice := newIdentity(t)
		e.post(t, token, signedBody(alice, token, "alice")).response(t)
		if err := e.store.RevokeMember(context.Background(), e.mesh.ID, alice.PublicKeyHex()); err != nil {
			t.Fatal(err)
		}
		a := e.post(t, token, signedBody(alice, token, "alice"))
		if a.status != http.StatusForbidden || a.errorBody(t).Error != CodeMemberRevoked {
			t.Fatalf("revoked key: %d %s, want 403 member_revoked", a.status, a.body)
		}
		// Another key still joins with the same invite.
		e.post(t, token, signedBody(newIdentity(t), token, "alice2")).response(t)
	})
}

func TestHandlerStoreFailure(t *testing.T) {
	e := newEnv(t, brokerOptionsSQLite(t))
	token := e.invite(t, 1, time.Hour)
	e.store.Close()
	a := e.post(t, token, signedBody(newIdentity(t), token, "alice"))
	if a.status != http.StatusInternalServerError || a.errorBody(t).Error != CodeInternal {
		t.Fatalf("closed store: %d %s, want 500 internal", a.status, a.body)
	}
	if logs := e.logs.String(); strings.Contains(logs, token) || !strings.Contains(logs, "join_failed") {
		t.Errorf("logs hold the token or lack join_failed:\n%s", logs)
	}
}
