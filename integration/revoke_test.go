package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// TestBrokerMemberRevoke: `claudemesh broker member list` shows the joined
// members; `broker member revoke` on the database of a running broker
// (another process) gets bob's connected daemon disconnected within the
// broker's revocation check, and refused from then on (its log says
// member_revoked); the list no longer shows bob. Bad input is refused with a clear message and changes nothing.
func TestBrokerMemberRevoke(t *testing.T) {
	m := newE2EMesh(t)
	m.bob.start(t)
	m.bob.waitConnected(t)
	members := func() map[string]string {
		t.Helper()
		r := m.brokerCLI("member", "list", "demo", "--json")
		var list []struct {
			Pubkey string `json:"pubkey"`
			Name   string `json:"display_name"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil {
			t.Fatalf("broker member list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		out := map[string]string{}
		for _, l := range list {
			out[l.Pubkey] = l.Name
		}
		return out
	}
	if got := members(); got[m.alice.pubkey] != "alice" || got[m.bob.pubkey] != "bob" {
		t.Fatalf("members before: %v", got)
	}
	for _, bad := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"demo", "not-a-key"}, 2, "64 hex"},
		{[]string{"demo", strings.Repeat("ab", 32)}, 1, "no member"},
		{[]string{"nosuch", m.bob.pubkey}, 1, "mesh nosuch not found"},
	} {
		r := m.brokerCLI(append([]string{"member", "revoke"}, bad.args...)...)
		if r.code != bad.code || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("revoke %v: exit %d, stderr %q; want %d and %q", bad.args, r.code, r.stderr, bad.code, bad.want)
		}
	}
	if got := members(); len(got) != 2 {
		t.Fatalf("refused revocations changed the members: %v", got)
	}

	r := m.brokerCLI("member", "revoke", "demo", m.bob.pubkey)
	if r.code != 0 || !strings.Contains(r.stdout, "revoked "+m.bob.pubkey) {
		t.Fatalf("broker member revoke: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wait.For(t, 15*time.Second, "bob's daemon to be disconnected", func() bool { return !health(t, m.bob.c).Connected })
	if rec := m.bob.d.waitLog("member_revoked", 1)[0]; str(rec, "mesh") != "demo" {
		t.Errorf("bob's member_revoked record: %v", rec)
	}
	if st := runCLI(t, m.bob.env, "daemon", "status"); st.code != 0 || !strings.Contains(st.stdout, "no (key revoked)") {
		t.Errorf("bob's daemon status after the revocation: exit %d\n%s", st.code, st.stdout)
	}
	// A send that needs the broker says why it cannot have it; one to a key
	// is refused too (403 member_revoked), not queued for a broker that
	// will never take it.
	if r := runCLI(t, m.bob.env, "send", "alice", "hello?"); r.code == 0 || !strings.Contains(r.stderr, "revoked") {
		t.Errorf("bob's send by name after the revocation: exit %d, stderr %q; want a failure saying revoked", r.code, r.stderr)
	}
	if r := runCLI(t, m.bob.env, "send", m.alice.pubkey, "hello?", "--client-message-id", "after-revoke"); r.code == 0 ||
		!strings.Contains(r.stderr, "member_revoked") {
		t.Errorf("bob's send to a key after the revocation: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if rows := listAll(t, m.bob.c, ""); byClientID(rows)["after-revoke"].ID != "" {
		t.Errorf("the refused send left a row: %+v", byClientID(rows)["after-revoke"])
	}
	if got := members(); got[m.bob.pubkey] != "" || got[m.alice.pubkey] != "alice" {
		t.Fatalf("members after the revocation: %v", got)
	}
	if r := m.brokerCLI("member", "revoke", "demo", m.bob.pubkey); r.code != 0 {
		t.Errorf("revoking twice: exit %d %s", r.code, r.stderr)
	}
	t.Log("checked: member list, refused bad revocations, a revoked member's daemon disconnected by the running broker")
}
