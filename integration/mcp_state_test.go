package integration

import (
	"strings"
	"testing"
)

// TestMCPState: the state tools of `claudemesh mcp`, through the real MCP
// client, as two agent sessions on the embedded broker: alice sets a key,
// bob reads and lists it, a stale if_version is a tool error with the
// current version and nothing is set, a missing key points to state_list.
func TestMCPState(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	a := startMCP(t, e, "alice", mcpOptions{})
	b := startMCP(t, e, "bob", mcpOptions{})
	a.waitPeer("bob") // both sessions' broker connections are up

	var set struct {
		Key     string `json:"key"`
		Version int64  `json:"version"`
	}
	a.mustCall("state_set", map[string]any{"key": "release", "value": map[string]any{"owner": "alice", "branch": "r1"}}, &set)
	if set.Key != "release" || set.Version != 1 {
		t.Fatalf("state_set: %+v", set)
	}
	var got struct {
		Key       string         `json:"key"`
		Value     map[string]any `json:"value"`
		Version   int64          `json:"version"`
		UpdatedBy string         `json:"updated_by"`
	}
	if res := b.mustCall("state_get", map[string]any{"key": "release"}, &got); got.Value["owner"] != "alice" || got.Version != 1 ||
		got.UpdatedBy != "alice" || !strings.Contains(text(res), `"branch":"r1"`) {
		t.Fatalf("state_get: %+v, %q", got, text(res))
	}
	if res := b.call("state_set", map[string]any{"key": "release", "value": "bob", "if_version": 0}); !res.IsError ||
		!strings.Contains(text(res), "version 1") {
		t.Errorf("state_set with a stale if_version: error %v, %q; want a tool error with the current version", res.IsError, text(res))
	}
	b.mustCall("state_set", map[string]any{"key": "release", "value": "bob", "if_version": 1}, &set)
	if set.Version != 2 {
		t.Errorf("state_set at version 1: %+v", set)
	}
	if res := a.call("state_get", map[string]any{"key": "nope"}); !res.IsError || !strings.Contains(text(res), "state_list") {
		t.Errorf("state_get nope: error %v, %q; want a tool error that points to state_list", res.IsError, text(res))
	}
	var list struct {
		Entries []struct {
			Key     string `json:"key"`
			Value   any    `json:"value"`
			Version int64  `json:"version"`
		} `json:"entries"`
	}
	a.mustCall("state_list", map[string]any{}, &list)
	if len(list.Entries) != 1 || list.Entries[0].Value != "bob" || list.Entries[0].Version != 2 {
		t.Fatalf("state_list: %+v", list)
	}
}
