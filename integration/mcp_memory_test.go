package integration

import (
	"strings"
	"testing"
)

// TestMCPMemory: the memory tools of `claudemesh mcp`, through the real
// MCP client, as two agent sessions on the embedded broker: what alice
// remembers bob recalls, with who and tags; forget removes it; a bad
// argument is a tool error that says what to fix.
func TestMCPMemory(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	a := startMCP(t, e, "alice", mcpOptions{})
	b := startMCP(t, e, "bob", mcpOptions{})
	a.waitPeer("bob") // both sessions' broker connections are up

	var stored struct {
		ID string `json:"id"`
	}
	a.mustCall("remember", map[string]any{"content": "the release branch is frozen until Friday", "tags": []string{"release"}}, &stored)
	if len(stored.ID) != 32 {
		t.Fatalf("remember: %+v", stored)
	}
	type recalled struct {
		Memories []struct {
			ID, Content, By string
			Tags            []string
		} `json:"memories"`
	}
	var found recalled
	res := b.mustCall("recall", map[string]any{"query": "release branch", "tags": []string{"release"}}, &found)
	if len(found.Memories) != 1 || found.Memories[0].ID != stored.ID || !strings.HasPrefix(found.Memories[0].By, "alice") ||
		len(found.Memories[0].Tags) != 1 || !strings.Contains(text(res), "frozen until Friday") {
		t.Fatalf("recall: %+v, %q", found, text(res))
	}
	if res := b.call("remember", map[string]any{"content": "x", "tags": []string{strings.Repeat("t", 65)}}); !res.IsError {
		t.Errorf("remember with a 65-byte tag: not an error: %q", text(res))
	}
	if res := b.call("recall", map[string]any{"query": "x", "limit": 500}); !res.IsError {
		t.Errorf("recall with limit 500: not an error: %q", text(res))
	}

	if res := b.call("forget", map[string]any{"id": "../" + stored.ID}); !res.IsError {
		t.Errorf("forget of an id that is not a memory's: not an error: %q", text(res))
	}

	var gone struct {
		ID string `json:"id"`
	}
	b.mustCall("forget", map[string]any{"id": stored.ID}, &gone)
	if gone.ID != stored.ID {
		t.Errorf("forget: %+v", gone)
	}
	found = recalled{}
	if res := a.mustCall("recall", map[string]any{"query": "release"}, &found); len(found.Memories) != 0 ||
		!strings.Contains(text(res), "Nothing remembered") {
		t.Errorf("recall after forget: %+v, %q", found, text(res))
	}
}
