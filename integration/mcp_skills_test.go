package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMCPSkills: the skill tools of `claudemesh mcp`, through the real MCP
// client, as an agent session on the embedded broker: a skill published
// with the CLI is listed (and found by its description) and read; an
// unknown name is a tool error that says what to do.
func TestMCPSkills(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	a := startMCP(t, e, "alice", mcpOptions{})
	// No wait for the session's broker link: a read tool waits for it.

	var empty struct {
		Skills []struct{ Name string } `json:"skills"`
	}
	if res := a.mustCall("skill_list", map[string]any{}, &empty); len(empty.Skills) != 0 || !strings.Contains(text(res), "no skills") {
		t.Fatalf("skill_list before any publish: %+v, %q", empty, text(res))
	}
	path := filepath.Join(t.TempDir(), "triage.md")
	if err := os.WriteFile(path, []byte("Label the issue, then ping the owner."), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, e, "skill", "publish", "triage", "--file", path, "--description", "Triage a GitHub issue", "--tag", "issues"); r.code != 0 {
		t.Fatalf("skill publish: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	var list struct {
		Skills []struct {
			Name        string   `json:"name"`
			Description string   `json:"description"`
			Tags        []string `json:"tags"`
			Version     int      `json:"version"`
		} `json:"skills"`
	}
	a.mustCall("skill_list", map[string]any{"query": "github"}, &list)
	if len(list.Skills) != 1 || list.Skills[0].Name != "triage" || list.Skills[0].Version != 1 || len(list.Skills[0].Tags) != 1 {
		t.Fatalf("skill_list github: %+v", list)
	}
	var got struct {
		Skill   struct{ Name string } `json:"skill"`
		Content string                `json:"content"`
	}
	if res := a.mustCall("skill_get", map[string]any{"name": "triage"}, &got); got.Content != "Label the issue, then ping the owner." ||
		got.Skill.Name != "triage" || text(res) != got.Content {
		t.Errorf("skill_get triage: %+v, %q", got, text(res))
	}
	if res := a.call("skill_get", map[string]any{"name": "nope"}); !res.IsError || !strings.Contains(text(res), "skill_list") {
		t.Errorf("skill_get nope: error %v, %q; want a tool error that points to skill_list", res.IsError, text(res))
	}
}
