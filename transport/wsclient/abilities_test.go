package wsclient

import (
	"slices"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
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
