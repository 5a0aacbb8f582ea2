package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// TestDisplayNameImpersonation: with alice a member, a second join as
// "аlice" (Cyrillic а) or "Alice" is refused; with alice offline, `claudemesh send
// alice` from bob — through his daemon and on the cold path — goes to
// alice's key and waits for her, and she gets it when her daemon starts.
// `broker member list` shows no look-alikes.
func TestDisplayNameImpersonation(t *testing.T) {
	brokerEnv, aliceEnv, bobEnv, malloryEnv := newEnv(t), newEnv(t), newEnv(t), newEnv(t)
	dir := filepath.Join(brokerEnv.daemonDir, "broker")
	startBrokerProc(t, brokerEnv, "--dir", dir)
	if r := runCLI(t, brokerEnv, "broker", "mesh", "create", "demo", "--dir", dir); r.code != 0 {
		t.Fatalf("mesh create: exit %d\n%s", r.code, r.stderr)
	}
	r := runCLI(t, brokerEnv, "broker", "invite", "demo", "--uses", "3", "--dir", dir)
	if r.code != 0 {
		t.Fatalf("broker invite: exit %d\n%s", r.code, r.stderr)
	}
	invite := strings.TrimSpace(r.stdout)
	join := func(e *env, name string) cliResult {
		t.Helper()
		if err := os.Remove(filepath.Join(e.configDir, "config.json")); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return runCLI(t, e, "join", invite, "--name", name)
	}
	for _, j := range []struct {
		e    *env
		name string
	}{{aliceEnv, "alice"}, {bobEnv, "bob"}} {
		if r := join(j.e, j.name); r.code != 0 {
			t.Fatalf("join --name %s: exit %d\n%s", j.name, r.code, r.stderr)
		}
	}
	for _, name := range []string{"аlice" /* Cyrillic а */, "Alice"} {
		if r := join(malloryEnv, name); r.code == 0 || !strings.Contains(r.stderr, "is taken in this mesh") ||
			!strings.Contains(r.stderr, "another --name") {
			t.Fatalf("join as %q: exit %d\nstdout %q\nstderr %s; want a refusal naming the taken name", name, r.code, r.stdout, r.stderr)
		}
	}
	if r := join(malloryEnv, "mallory"); r.code != 0 { // the refusal did not use the invite
		t.Fatalf("join --name mallory: exit %d\n%s", r.code, r.stderr)
	}
	alice, bob := joinedMember(t, aliceEnv, "demo"), joinedMember(t, bobEnv, "demo")
	startDaemon(t, bobEnv)
	startDaemon(t, malloryEnv)
	waitPeers(t, bobEnv, bob.Pubkey)

	r = sendCLI(t, bobEnv, "alice", "while you were out")
	if r.code != 0 || !regexp.MustCompile(`^(queued|inflight) [0-9A-Z]{26} to alice \(`+alice.Pubkey[:16]+`…\)\n$`).MatchString(r.stdout) {
		t.Fatalf("send alice (offline) through the daemon: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	r = sendCLI(t, bobEnv, "--no-daemon", "ALICE", "cold and offline")
	if r.code != 0 || !strings.Contains(r.stdout, "to ALICE ("+alice.Pubkey[:16]+"…)") {
		t.Fatalf("send --no-daemon ALICE (offline): exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	startDaemon(t, aliceEnv)
	for _, body := range []string{"while you were out", "cold and offline"} {
		if it := waitInbox(t, aliceEnv, body); it.SenderPubkey != bob.Pubkey || it.Kind != messages.KindDM {
			t.Errorf("%q reached alice as %+v, want a DM from bob", body, it)
		}
	}
	if r := runCLI(t, brokerEnv, "broker", "member", "list", "demo", "--dir", dir); r.code != 0 || strings.Contains(r.stdout, "warning") ||
		strings.Count(r.stdout, "\n") != 4 {
		t.Errorf("member list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestHelloReplayAcrossBrokerProcesses: two `broker up` processes on one
// PostgreSQL database; a signed hello accepted by the first is refused as
// hello_replayed by the second (and by the first again), and a fresh one
// is accepted.
func TestHelloReplayAcrossBrokerProcesses(t *testing.T) {
	dbURL := brokertest.PostgresURL(t)
	brokerEnv, aliceEnv := newEnv(t), newEnv(t)
	first := startBrokerProc(t, brokerEnv, "--database-url", dbURL)
	second := startBrokerProc(t, brokerEnv, "--database-url", dbURL)
	if r := runCLI(t, brokerEnv, "broker", "mesh", "create", "replay", "--database-url", dbURL); r.code != 0 {
		t.Fatalf("mesh create: exit %d\n%s", r.code, r.stderr)
	}
	r := runCLI(t, brokerEnv, "broker", "invite", "replay", "--database-url", dbURL, "--broker-url", "http://"+first.addr)
	if r.code != 0 {
		t.Fatalf("invite: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, aliceEnv, "join", strings.TrimSpace(r.stdout), "--name", "alice"); r.code != 0 {
		t.Fatalf("join: exit %d\n%s", r.code, r.stderr)
	}
	alice := joinedMember(t, aliceEnv, "replay")
	captured := alice.hello("daemon-1")
	a := dialBroker(t, "alice", "ws://"+first.addr+"/ws")
	a.send(captured)
	a.next("hello_ack")
	for _, b := range []*brokerProc{second, first} {
		c := dialBroker(t, "replay", "ws://"+b.addr+"/ws")
		c.send(captured)
		if f := c.next("error"); f["code"] != "hello_replayed" {
			t.Fatalf("the captured hello replayed at %s: %v, want hello_replayed", b.addr, f)
		}
		if code := c.closeCode(); code != 1008 {
			t.Fatalf("the replay's close: %d, want 1008", code)
		}
	}
	fresh := dialBroker(t, "fresh", "ws://"+second.addr+"/ws")
	fresh.send(alice.hello("daemon-2"))
	fresh.next("hello_ack")
}

// TestInviteUsesRecordedURL: `broker invite` links to the address the
// running broker listens on (recorded in its database), or to its
// --public-url, and says plainly when no broker recorded one.
func TestInviteUsesRecordedURL(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(e.daemonDir, "broker")
	if r := runCLI(t, e, "broker", "mesh", "create", "demo", "--dir", dir); r.code != 0 {
		t.Fatalf("mesh create: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, e, "broker", "invite", "demo", "--dir", dir); r.code != 2 || !strings.Contains(r.stderr, "broker URL is not known") ||
		!strings.Contains(r.stderr, "--broker-url") || r.stdout != "" {
		t.Errorf("invite before any broker ran: exit %d\nstdout %q\nstderr %s; want 2 saying the URL is not known", r.code, r.stdout, r.stderr)
	}
	b := startBrokerProc(t, e, "--dir", dir)
	r := runCLI(t, e, "broker", "invite", "demo", "--dir", dir)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "http://"+b.addr+"/join/") {
		t.Fatalf("invite with the broker on %s: exit %d\nstdout %q\nstderr %s", b.addr, r.code, r.stdout, r.stderr)
	}
	other := newEnv(t)
	if j := runCLI(t, other, "join", strings.TrimSpace(r.stdout), "--name", "joiner"); j.code != 0 {
		t.Fatalf("join through the printed invite: exit %d\n%s", j.code, j.stderr)
	}
	if err := b.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-b.done
	startBrokerProc(t, e, "--dir", dir, "--public-url", "https://mesh.example.org/")
	r = runCLI(t, e, "broker", "invite", "demo", "--dir", dir)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "https://mesh.example.org/join/") {
		t.Errorf("invite with --public-url: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, e, "broker", "invite", "demo", "--dir", dir, "--broker-url", "http://10.1.2.3:7900"); r.code != 0 ||
		!strings.HasPrefix(r.stdout, "http://10.1.2.3:7900/join/") {
		t.Errorf("invite --broker-url: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
}
