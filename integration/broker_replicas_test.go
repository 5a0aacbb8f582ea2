package integration

import (
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// TestBrokerReplicaProcesses: two `claudemesh broker up` processes on one
// PostgreSQL database serve one mesh. A DM from a client of the first to a
// client of the second is pushed live, and dedupe holds across them.
func TestBrokerReplicaProcesses(t *testing.T) {
	dbURL := brokertest.PostgresURL(t)
	brokerEnv := newEnv(t)
	first := startBrokerProc(t, brokerEnv, "--database-url", dbURL)
	second := startBrokerProc(t, brokerEnv, "--database-url", dbURL)
	alice, bob, a, b := twoMembersOnReplicas(t, brokerEnv, dbURL, "replicas", first, second)

	frame, _ := alice.sealedDM(t, bob.Pubkey, "rep-1", "across replicas")
	a.send(frame)
	ack := a.next("ack")
	if ack["code"] != float64(201) {
		t.Fatalf("ack %v", ack)
	}
	push := b.push()
	if push["client_message_id"] != "rep-1" || push["messageId"] != ack["broker_message_id"] {
		t.Fatalf("push on the second broker %v", push)
	}
	plain, err := bob.id.OpenDM(alice.Pubkey, str(push, "nonce"), str(push, "ciphertext"))
	if err != nil || string(plain) != "across replicas" {
		t.Fatalf("decrypt: %q %v", plain, err)
	}

	a2 := dialBroker(t, "alice-2", "ws://"+second.addr+"/ws")
	a2.send(alice.hello("alice-2"))
	a2.next("hello_ack")
	a2.send(frame)
	if dup := a2.next("ack"); dup["code"] != float64(200) || dup["broker_message_id"] != ack["broker_message_id"] {
		t.Fatalf("the same send through the other broker: %v, want 200 with the original id", dup)
	}
}

// twoMembersOnReplicas makes mesh slug in the broker database at dbURL,
// joins alice and bob with an invite of first, and connects alice to
// first (her config.json names it) and bob to second.
func twoMembersOnReplicas(t *testing.T, brokerEnv *env, dbURL, slug string, first, second *brokerProc) (alice, bob *brokerMember,
	a, b *wsClient) {
	t.Helper()
	aliceEnv, bobEnv := newEnv(t), newEnv(t)
	if r := runCLI(t, brokerEnv, "broker", "mesh", "create", slug, "--database-url", dbURL); r.code != 0 {
		t.Fatalf("mesh create: exit %d\n%s", r.code, r.stderr)
	}
	r := runCLI(t, brokerEnv, "broker", "invite", slug, "--uses", "2", "--database-url", dbURL, "--broker-url", "http://"+first.addr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	invite := lines[len(lines)-1]
	for _, j := range []struct {
		e    *env
		name string
	}{{aliceEnv, "alice"}, {bobEnv, "bob"}} {
		if r := runCLI(t, j.e, "join", invite, "--name", j.name); r.code != 0 {
			t.Fatalf("join %s: exit %d\n%s", j.name, r.code, r.stderr)
		}
	}
	alice, bob = joinedMember(t, aliceEnv, slug), joinedMember(t, bobEnv, slug)
	a = alice.connect(t, "alice")
	b = dialBroker(t, "bob", "ws://"+second.addr+"/ws")
	b.send(bob.hello("bob-session"))
	b.next("hello_ack")
	return alice, bob, a, b
}
