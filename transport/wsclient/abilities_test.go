package wsclient

import (
	"slices"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// TestValidateAbilities: the abilities (shared data, nodes) advertised at version 1
// are recorded (an upstream broker's answer has none; another version is
// not ours), and Negotiated lists them beside the delivery features.
func TestValidateAbilities(t *testing.T) {
	s, reason := Validate(goodResponse())
	if reason != nil || len(s.Abilities) != 0 || !slices.Equal(s.Negotiated(), s.Features) {
		t.Fatalf("upstream-like answer: abilities %v, negotiated %v, %v", s.Abilities, s.Negotiated(), reason)
	}
	r := goodResponse()
	for _, name := range []string{"topics", "skills", "state", AbilityNodes} {
		r.Supported[name] = messages.Feature{Params: messages.FeatureParams{"version": 1.0}}
	}
	r.Supported["memory"] = messages.Feature{Params: messages.FeatureParams{"version": 2.0}}
	s, reason = Validate(r)
	if reason != nil || !slices.Equal(s.Abilities, []string{AbilityNodes, "skills", "state", "topics"}) {
		t.Fatalf("abilities = %v, %v; want nodes, skills, state and topics (memory is version 2)", s.Abilities, reason)
	}
	want := []string{FeatureDedupe, FeatureConcurrent, FeatureMaxPayload, AbilityNodes, "skills", "state", "topics"}
	slices.Sort(want)
	if got := s.Negotiated(); !slices.Equal(got, want) {
		t.Errorf("Negotiated() = %v, want %v", got, want)
	}
}

// TestDialRecordsNode: a member connection's hello carries the daemon
// version and host name our broker lists the node with, and the broker
// advertises nodes; a connection with the CLI's channel is no node.
func TestDialRecordsNode(t *testing.T) {
	b := startBroker(t, broker.Mesh{})
	alice, bob := b.member("alice"), b.member("bob")
	cfg := b.config(alice)
	cfg.DaemonVersion, cfg.Hostname = "1.2.3", "alice-box"
	ca, sa := dial(t, cfg)
	if !slices.Contains(sa.Abilities, AbilityNodes) {
		t.Errorf("abilities %v lack nodes", sa.Abilities)
	}
	cli := b.config(bob)
	cli.Channel = messages.ChannelCLI
	dial(t, cli)
	if err := ca.Send(&messages.ListNodesFrame{Type: messages.TypeListNodes, ReqID: "nd-1"}); err != nil {
		t.Fatal(err)
	}
	list := next[*messages.NodeListFrame](t, ca)
	if list.ReqID != "nd-1" || len(list.Nodes) != 1 || list.Nodes[0].Name != "alice" || list.Nodes[0].Version != "1.2.3" ||
		list.Nodes[0].Host != "alice-box" || list.Nodes[0].State != messages.NodeOnline {
		t.Fatalf("node_list = %+v; want alice alone, online on alice-box at 1.2.3", list)
	}
}
