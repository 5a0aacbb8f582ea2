package mcpserver

import (
	"log/slog"
	"regexp"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolLikeName is a word of the instructions that reads as a tool's name:
// snake_case. (A one-word tool, such as recall, cannot be told from the
// prose around it.)
var toolLikeName = regexp.MustCompile(`\b[a-z]+(?:_[a-z]+)+\b`)

// TestInstructionsNameEveryTool: the instructions a client receives at
// the handshake name every tool the server lists, and every tool-like
// name in them is a tool it lists or an argument of one (state_set's
// if_version), so that neither a new tool nor a renamed one goes
// unmentioned; for every tool set.
func TestInstructionsNameEveryTool(t *testing.T) {
	for _, set := range ToolSetNames() {
		t.Run(set, func(t *testing.T) { checkInstructions(t, ToolSet(set)) })
	}
}

func checkInstructions(t *testing.T, set ToolSet) {
	cs := connectInMemory(t, newMCPServer(&sessionLink{}, "test", set, slog.New(slog.DiscardHandler)).srv)
	instructions := cs.InitializeResult().Instructions
	tools, arguments := map[string]bool{}, map[string]bool{}
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools[tool.Name] = true
		schema, _ := tool.InputSchema.(map[string]any)
		props, _ := schema["properties"].(map[string]any)
		for arg := range props {
			arguments[arg] = true
		}
	}
	if len(tools) == 0 {
		t.Fatal("the server lists no tools")
	}
	for name := range tools {
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(instructions) {
			t.Errorf("tool %s is not named in the instructions (mcpInstructions)", name)
		}
	}
	mentioned := toolLikeName.FindAllString(instructions, -1)
	slices.Sort(mentioned)
	for _, name := range slices.Compact(mentioned) {
		if !tools[name] && !arguments[name] {
			t.Errorf("the instructions name %s, which is neither a tool the server lists nor an argument of one", name)
		}
	}
}

// connectInMemory connects a client to srv over in-memory transports,
// both closed when the test ends.
func connectInMemory(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
