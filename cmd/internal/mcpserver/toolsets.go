package mcpserver

import (
	"fmt"
	"slices"
	"strings"
)

// ToolSet names the tools an MCP server serves (`claudemesh mcp --tools`).
type ToolSet string

const (
	// ToolsClaudemesh is claudemesh's own tools (tools.go and the feature
	// files), the default.
	ToolsClaudemesh ToolSet = "claudemesh"
	// ToolsAgentMail is MCP Agent Mail's tool names and argument shapes,
	// mapped onto claudemesh's (agentmail.go), for agents whose prompts
	// were written for Agent Mail.
	ToolsAgentMail ToolSet = "agent-mail"
)

// toolSetTable are the sets a server can serve: the instructions its client
// reads at the handshake, which name every tool of the set
// (TestInstructionsNameEveryTool), and the method that registers them.
var toolSetTable = map[ToolSet]struct {
	instructions string
	add          func(*mcpServer)
}{
	ToolsClaudemesh: {mcpInstructions, (*mcpServer).addTools},
	ToolsAgentMail:  {agentMailInstructions, (*mcpServer).addAgentMailTools},
}

// ToolSetNames are the names ParseToolSet takes, sorted.
func ToolSetNames() []string {
	var names []string
	for set := range toolSetTable {
		names = append(names, string(set))
	}
	slices.Sort(names)
	return names
}

// ParseToolSet reads a tool set's name ("": claudemesh's own).
func ParseToolSet(name string) (ToolSet, error) {
	if name == "" {
		return ToolsClaudemesh, nil
	}
	if _, ok := toolSetTable[ToolSet(name)]; !ok {
		return "", fmt.Errorf("no tool set %q: the sets are %s", name, strings.Join(ToolSetNames(), ", "))
	}
	return ToolSet(name), nil
}
