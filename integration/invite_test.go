package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/transport/join"
)

// inviteVectors are the §3.7 vectors the join package tests.
type inviteVectors struct {
	Vectors []struct {
		Name   string `json:"name"`
		Token  string `json:"token"`
		Expect string `json:"expect"`
	} `json:"vectors"`
}

func loadInviteVectors(t *testing.T) *inviteVectors {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "transport", "join", "testdata", "invite-v1-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v inviteVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

// expiredInviteVector is a validly signed invite that expired in 2023.
func expiredInviteVector(t *testing.T) string {
	t.Helper()
	for _, v := range loadInviteVectors(t).Vectors {
		if v.Expect == "expired" {
			return v.Token
		}
	}
	t.Fatal("no expired vector")
	return ""
}

// TestSignedInviteFlow: `broker invite` prints a signed v1 link; `join`
// takes it in any form, one member per use, and refuses each bad vector
// with its own exit code before contacting anyone; the members' daemons
// then exchange a message through the broker.
func TestSignedInviteFlow(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t) // broker process; alice and bob joined with the link (3 uses)
	inv, err := join.Check(linkToken(t, m.invite), time.Now())
	if err != nil {
		t.Fatalf("the printed link %s does not verify: %v", m.invite, err)
	}
	if p := inv.Payload; p.BrokerURL != "ws://"+m.broker.addr+"/ws" || p.MeshSlug != "demo" || p.Role != "member" ||
		inv.JoinURL != "http://"+m.broker.addr+"/join" || !strings.HasPrefix(m.invite, "http://"+m.broker.addr+"/join/") {
		t.Errorf("invite %+v (link %s)", p, m.invite)
	}
	if r := m.brokerCLI("invite", "list", "demo"); r.code != 0 || !strings.Contains(r.stdout, "1/3") || !strings.Contains(r.stdout, "active") {
		t.Errorf("invite list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The third use, through the ic:// form; the fourth is refused.
	if r := runCLI(t, newEnv(t), "join", "ic://join/"+inv.Token, "--name", "carol"); r.code != 0 || !strings.Contains(r.stdout, "joined mesh demo") {
		t.Fatalf("join with the ic:// form: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	late := newEnv(t)
	written, _ := os.ReadFile(filepath.Join(late.configDir, "config.json"))
	if r := runCLI(t, late, "join", "ic://join/"+inv.Token, "--name", "dave"); r.code != 1 || !strings.Contains(r.stderr, "no uses left") {
		t.Errorf("fourth join: exit %d, stderr %q; want 1 and 'no uses left'", r.code, r.stderr)
	}
	for _, v := range loadInviteVectors(t).Vectors {
		want := map[string]int{"ok": 0, "malformed": 11, "expired": 12, "bad_signature": 13}[v.Expect]
		if v.Expect == "ok" {
			continue // its broker (127.0.0.1:7900) is not this one
		}
		r := runCLI(t, late, "join", v.Token, "--name", "eve")
		if r.code != want || !strings.Contains(r.stderr, "invite") {
			t.Errorf("join %s: exit %d, stderr %q; want %d", v.Name, r.code, r.stderr, want)
		}
	}
	if r := runCLI(t, late, "join", "https://example.invalid/join"); r.code != 10 {
		t.Errorf("join of a link without a token: exit %d, stderr %q; want 10", r.code, r.stderr)
	}
	if now, _ := os.ReadFile(filepath.Join(late.configDir, "config.json")); string(now) != string(written) {
		t.Errorf("refused joins changed config.json:\n%s", now)
	}

	// A revoked invite joins no one.
	r := m.brokerCLI("invite", "demo", "--broker-url", "http://"+m.broker.addr, "--expires", "1h", "--json")
	var issued struct{ URL, ID string }
	if err := json.Unmarshal([]byte(r.stdout), &issued); r.code != 0 || err != nil {
		t.Fatalf("invite --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if r := m.brokerCLI("invite", "revoke", "demo", issued.ID); r.code != 0 {
		t.Fatalf("invite revoke: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, late, "join", issued.URL, "--name", "frank"); r.code != 1 || !strings.Contains(r.stderr, "revoked") {
		t.Errorf("join with a revoked invite: exit %d, stderr %q; want 1 and 'revoked'", r.code, r.stderr)
	}

	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)
	stream := openSSE(t, bob.env.socket(), "")
	if st, body, err := trySend(alice.c, bob.pubkey, "joined by a signed invite", "inv-1"); err != nil || st != http.StatusAccepted {
		t.Fatalf("send: %d %v %s", st, err, body)
	}
	got := messageOf(t, stream.next("message", e2eDeliverDeadline))
	if got.Body == nil || *got.Body != "joined by a signed invite" || got.SenderPubkey != alice.pubkey || got.SenderName != "alice" {
		t.Errorf("bob received %+v", got)
	}
}

// linkToken is the token of a printed link.
func linkToken(t *testing.T, link string) string {
	t.Helper()
	l, err := join.ParseLink(link)
	if err != nil || l.Token == "" {
		t.Fatalf("ParseLink(%s) = %+v, %v", link, l, err)
	}
	return l.Token
}
