package mcpserver

import (
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestAgentDetail: a daemon's error detail reaches the agent without the
// session's internal route, without advice naming claudemesh commands,
// and clipped; and an unknown topic in a send points to the topic tools.
func TestAgentDetail(t *testing.T) {
	s := &Session{reg: messages.RegisterSession{Mesh: "local", SessionID: "01JSESSION"}}
	for _, c := range []struct{ detail, want string }{
		{"mesh local/01JSESSION has no topic \"x\": list them with `claudemesh topic list`, or create it with `claudemesh topic create x`",
			"mesh local has no topic \"x\""},
		{"peer 1234 is not connected", "peer 1234 is not connected"},
		{strings.Repeat("y", 300), strings.Repeat("y", echoLimit) + "… (300 characters)"},
	} {
		if got := agentDetail(s, c.detail); got != c.want {
			t.Errorf("agentDetail(%.60q) = %q, want %q", c.detail, got, c.want)
		}
	}
	err := daemonRefusal(s, messages.TopicNotFound("local/01JSESSION", "#x"))
	if got := err.Error(); !strings.Contains(got, "topic_list") || strings.Contains(got, "01JSESSION") || strings.Contains(got, "claudemesh topic") ||
		strings.Contains(got, "list_peers") {
		t.Errorf("an unknown topic's refusal: %q", got)
	}
}
