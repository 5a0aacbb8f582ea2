package main

import (
	"os"
	"reflect"
	"testing"
)

// TestInstallClaudeCodeToolSet: install claude-code --tools agent-mail
// writes the flag into the MCP entry's arguments, installing again with
// claudemesh's own set takes it out, and a set that does not exist is
// refused with nothing written.
func TestInstallClaudeCodeToolSet(t *testing.T) {
	path := claudeHome(t)
	args := func() []any {
		t.Helper()
		servers, _ := readJSON(t, path)["mcpServers"].(map[string]any)
		entry, _ := servers[claudeServerName].(map[string]any)
		a, _ := entry["args"].([]any)
		return a
	}
	for _, c := range []struct {
		tools string
		want  []any
	}{
		{"agent-mail", []any{"mcp", "--tools", "agent-mail"}},
		{"claudemesh", []any{"mcp"}},
	} {
		if err := (&installClaudeCodeCmd{Tools: c.tools}).Run(); err != nil {
			t.Fatal(err)
		}
		if got := args(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("--tools %s: args %v, want %v", c.tools, got, c.want)
		}
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&installClaudeCodeCmd{Tools: "mail"}).Run(); err == nil {
		t.Error("--tools mail: no error")
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("a refused --tools changed %s:\n%s", path, after)
	}
}
