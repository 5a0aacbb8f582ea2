package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// writeLegacyConfig makes e's config.toml say [features] legacy_broker.
func writeLegacyConfig(t *testing.T, e *env) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.daemonDir, "config.toml"), []byte("[features]\nlegacy_broker = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestColdPathLegacyBroker: `claudemesh send` without a daemon refuses a
// broker that does not negotiate the delivery contract (the upstream
// broker's stand-in), saying how to use it anyway; with --legacy-broker,
// or [features] legacy_broker in config.toml, it sends.
func TestColdPathLegacyBroker(t *testing.T) {
	t.Parallel()
	u := newUpstreamStandIn(t)
	e := newEnv(t)
	carol, err := config.NewMembership("upstream", "ws"+strings.TrimPrefix(u.srv.URL, "http")+"/ws")
	if err == nil {
		_, err = config.Paths{ConfigDir: e.configDir}.AddMembership(carol)
	}
	if err != nil {
		t.Fatal(err)
	}
	peer, err := meshcrypto.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	to := peer.PublicKeyHex()
	send := func(args ...string) cliResult {
		return runCLI(t, e, append([]string{"send", "--no-daemon", "--mesh", "upstream"}, args...)...)
	}

	r := send("--client-message-id", "leg-1", to, "refused")
	if _, _, sends := u.counts(); r.code != 1 || !strings.Contains(r.stderr, "--legacy-broker") ||
		!strings.Contains(r.stderr, "[features] legacy_broker = true") || sends != 0 {
		t.Fatalf("strict cold send to a broker that does not negotiate: exit %d, %d sends\nstdout %q\nstderr %s", r.code, sends, r.stdout, r.stderr)
	}
	r = send("--legacy-broker", "--json", "--client-message-id", "leg-2", to, "by the flag")
	var ack struct {
		Via       string `json:"via"`
		Queued    bool   `json:"queued"`
		MessageID string `json:"messageId"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ack); r.code != 0 || err != nil || ack.Via != "broker" || !ack.Queued || ack.MessageID != "upstream-leg-2" {
		t.Fatalf("--legacy-broker: exit %d, %v\nstdout %q\nstderr %s", r.code, err, r.stdout, r.stderr)
	}
	writeLegacyConfig(t, e)
	if r := send("--client-message-id", "leg-3", to, "by the config"); r.code != 0 || !strings.HasPrefix(r.stdout, "sent leg-3") {
		t.Fatalf("[features] legacy_broker: exit %d\n%q\n%s", r.code, r.stdout, r.stderr)
	}
	if _, _, sends := u.counts(); sends != 2 {
		t.Fatalf("the broker got %d sends, want 2 (leg-2, leg-3)", sends)
	}
}

// TestColdPathLegacyFlagOnOurBroker: against our broker, which negotiates,
// --legacy-broker and [features] legacy_broker skip the negotiation and
// the messages still reach bob.
func TestColdPathLegacyFlagOnOurBroker(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	send := func(args ...string) cliResult {
		return runCLI(t, alice.env, append([]string{"send", "--no-daemon"}, args...)...)
	}
	if r := send("--legacy-broker", "--client-message-id", "leg-0", bob.pubkey, "by the flag"); r.code != 0 || !strings.HasPrefix(r.stdout, "sent leg-0") {
		t.Fatalf("--legacy-broker: exit %d\n%q\n%s", r.code, r.stdout, r.stderr)
	}
	writeLegacyConfig(t, alice.env)
	if r := send("--client-message-id", "leg-1", bob.pubkey, "by the config"); r.code != 0 || !strings.HasPrefix(r.stdout, "sent leg-1") {
		t.Fatalf("[features] legacy_broker: exit %d\n%q\n%s", r.code, r.stdout, r.stderr)
	}
	bob.start(t)
	want := map[string]string{"leg-0": "by the flag", "leg-1": "by the config"}
	var got map[string]string
	wait.For(t, e2eDeliverDeadline, "bob's inbox to hold leg-0 and leg-1", func() bool {
		got = map[string]string{}
		for _, it := range inboxAll(t, bob.c) {
			got[it.ClientMessageID] = messages.Deref(it.Body)
		}
		return len(got) >= len(want)
	})
	for id, body := range want {
		if got[id] != body || len(got) != len(want) {
			t.Errorf("bob's inbox: %v, want %v", got, want)
		}
	}
}
