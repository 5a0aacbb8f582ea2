package join

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// The requests below are what the upstream CLI sends, built here with the
// standard library alone: no code of this package makes them.

// upstreamBody is the upstream CLI's join request for token: the token, its
// decoded payload, a fresh ed25519 public key and the name.
func upstreamBody(t *testing.T, token, name string) map[string]any {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"invite_token": token, "invite_payload": json.RawMessage(raw),
		"peer_pubkey": hex.EncodeToString(pub), "display_name": name}
}

// upstreamAnswer is a decoded answer: the status and the JSON body.
type upstreamAnswer struct {
	status int
	body   map[string]any
}

// postJoin POSTs body (JSON-encoded unless a string) to the server's /join.
func postJoin(t *testing.T, srvURL string, body any) upstreamAnswer {
	t.Helper()
	raw, ok := body.(string)
	if !ok {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	resp, err := http.Post(srvURL+"/join", "application/json", strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := upstreamAnswer{status: resp.StatusCode}
	if err := json.Unmarshal(b, &a.body); err != nil || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("answer %d %q (%s): %v", resp.StatusCode, b, resp.Header.Get("Content-Type"), err)
	}
	return a
}

// tamperToken re-encodes token's payload with one field changed, keeping
// the signature.
func tamperToken(t *testing.T, token, field string, value any) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	p[field] = value
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestJoinUpstreamShape: one member per use, a key that joined again
// answered alreadyMember without a use, and the member stored as sent.
func TestJoinUpstreamShape(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		inv := e.invite(t, 2, time.Hour)
		alice := upstreamBody(t, inv.Token, "alice")
		first := postJoin(t, e.srv.URL, alice)
		id, _ := first.body["memberId"].(string)
		if first.status != 200 || first.body["ok"] != true || id == "" || first.body["alreadyMember"] != nil {
			t.Fatalf("first join: %d %v", first.status, first.body)
		}
		m, err := e.store.MemberByPubkey(context.Background(), e.mesh.ID, alice["peer_pubkey"].(string))
		if err != nil || m.ID != id || m.DisplayName != "alice" {
			t.Errorf("stored member %+v, %v; want id %s named alice", m, err, id)
		}
		again := postJoin(t, e.srv.URL, alice)
		if again.status != 200 || again.body["memberId"] != id || again.body["alreadyMember"] != true {
			t.Errorf("join again: %d %v; want the same member, alreadyMember", again.status, again.body)
		}
		if got := e.usesLeft(t, inv.ID); got != 1 {
			t.Errorf("%d uses left after one member; want 1", got)
		}
		if a := postJoin(t, e.srv.URL, upstreamBody(t, inv.Token, "bob")); a.status != 200 {
			t.Errorf("second use: %d %v", a.status, a.body)
		}
		used := postJoin(t, e.srv.URL, upstreamBody(t, inv.Token, "carol"))
		if used.status != 400 || used.body["ok"] != false || used.body["error"] != CodeExhausted {
			t.Errorf("third use: %d %v; want 400 %s", used.status, used.body, CodeExhausted)
		}
		if n := e.members(t); n != 2 {
			t.Errorf("%d members; want 2", n)
		}
	})
}

// TestJoinRefusals: each bad request gets its status and error, and
// changes nothing: no member, no use.
func TestJoinRefusals(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		inv := e.invite(t, 5, time.Hour)
		revoked := e.invite(t, 5, time.Hour)
		if err := e.store.RevokeInvite(ctx, e.mesh.Slug, revoked.ID); err != nil {
			t.Fatal(err)
		}
		expiring := e.invite(t, 5, time.Minute)
		other := newEnv(t, broker.Options{Dir: t.TempDir()}) // a broker that never issued inv
		foreign := other.invite(t, 1, time.Hour)
		takenBody := upstreamBody(t, inv.Token, "alice")
		if a := postJoin(t, e.srv.URL, takenBody); a.status != 200 {
			t.Fatalf("alice: %d %v", a.status, a.body)
		}
		revokedKey := upstreamBody(t, inv.Token, "mallory")
		if a := postJoin(t, e.srv.URL, revokedKey); a.status != 200 {
			t.Fatalf("mallory: %d %v", a.status, a.body)
		}
		if err := e.store.RevokeMember(ctx, e.mesh.ID, revokedKey["peer_pubkey"].(string)); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Minute) // expiring is now expired

		with := func(token, name string, change func(map[string]any)) map[string]any {
			b := upstreamBody(t, token, name)
			if change != nil {
				change(b)
			}
			return b
		}
		tampered := tamperToken(t, inv.Token, "mesh_slug", "other")
		cases := []struct {
			name   string
			body   any
			status int
			error  string
		}{
			{"expired", with(expiring.Token, "bob", nil), 400, CodeExpired},
			{"revoked", with(revoked.Token, "bob", nil), 400, CodeRevoked},
			{"tampered", with(tampered, "bob", nil), 400, CodeBadSignature},
			{"role raised", with(tamperToken(t, inv.Token, "role", "admin"), "bob", nil), 400, CodeBadSignature},
			{"issued by another broker", with(foreign.Token, "bob", nil), 400, CodeNotFound},
			{"opaque token", with("Zm9vYmFyYmF6cXV1eGNvcmdlZ3JhdWx0", "bob", func(b map[string]any) {
				b["invite_payload"] = map[string]any{"v": 1}
			}), 400, CodeMalformed},
			{"payload of another invite", with(inv.Token, "bob", func(b map[string]any) {
				b["invite_payload"] = json.RawMessage(mustDecode(t, revoked.Token))
			}), 400, CodePayloadMismatch},
			{"revoked member", revokedKey, 400, CodeMemberRevoked},
			{"name taken", with(inv.Token, "ALICE", nil), 400, CodeNameTaken},
			{"blank name", with(inv.Token, "  ", nil), 400, CodeInvalidName},
			{"no display_name", with(inv.Token, "", nil), 400, CodeRequired},
			{"no invite_payload", with(inv.Token, "bob", func(b map[string]any) { delete(b, "invite_payload") }), 400, CodeRequired},
			{"payload not an object", with(inv.Token, "bob", func(b map[string]any) { b["invite_payload"] = "x" }), 400, CodeRequired},
			{"short pubkey", with(inv.Token, "bob", func(b map[string]any) { b["peer_pubkey"] = "abcd" }), 400, CodeInvalidPubkey},
			{"not JSON", `{"invite_token":`, 400, CodeInvalidJSON},
			{"two objects", `{} {}`, 400, CodeInvalidJSON},
			{"too large", `{"display_name":"` + strings.Repeat("a", MaxRequestBytes) + `"}`, 413, CodeTooLarge},
		}
		for _, c := range cases {
			a := postJoin(t, e.srv.URL, c.body)
			if a.status != c.status || a.body["ok"] != false || a.body["error"] != c.error || a.body["detail"] == "" {
				t.Errorf("%s: %d %v; want %d %q with a detail", c.name, a.status, a.body, c.status, c.error)
			}
		}
		if n, left := e.members(t), e.usesLeft(t, inv.ID); n != 1 || left != 3 {
			t.Errorf("after the refusals: %d active members, %d uses left; want 1 (alice) and 3", n, left)
		}
		resp, err := http.Get(e.srv.URL + "/join")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
			t.Errorf("GET /join: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
		}
		if logs := e.logs.String(); strings.Contains(logs, inv.Token[:40]) {
			t.Errorf("the handler logged a token: %s", logs)
		}
	})
}

// TestJoinConcurrentOneUse: many keys racing for a one-use invite; one
// joins.
func TestJoinConcurrentOneUse(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		inv := e.invite(t, 1, time.Hour)
		answers := make([]upstreamAnswer, 16)
		bodies := make([]map[string]any, len(answers))
		for i := range bodies {
			bodies[i] = upstreamBody(t, inv.Token, "agent-"+string(rune('a'+i)))
		}
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() { answers[i] = postJoin(t, e.srv.URL, bodies[i]) })
		}
		wg.Wait()
		ok := 0
		for _, a := range answers {
			switch {
			case a.status == 200:
				ok++
			case a.status != 400 || a.body["error"] != CodeExhausted:
				t.Errorf("answer %d %v; want 200 or 400 %s", a.status, a.body, CodeExhausted)
			}
		}
		if ok != 1 || e.members(t) != 1 || e.usesLeft(t, inv.ID) != 0 {
			t.Errorf("%d joined, %d members, %d uses left; want 1, 1, 0", ok, e.members(t), e.usesLeft(t, inv.ID))
		}
	})
}

func mustDecode(t *testing.T, token string) []byte {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
