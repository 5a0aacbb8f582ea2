package main

import (
	"fmt"
	"os"

	"github.com/claudemesh/claudemesh-go/cmd/internal/mcpserver"
	"github.com/claudemesh/claudemesh-go/cmd/internal/sysmon"
	"github.com/claudemesh/claudemesh-go/config"
)

type mcpCmd struct {
	Mesh  string `placeholder:"SLUG" env:"CLAUDEMESH_MESH" help:"Mesh the session joins (default: the daemon's only mesh, identities of daemon add-agent aside)."`
	Name  string `placeholder:"NAME" help:"Display name peers see (default: CLAUDEMESH_DISPLAY_NAME, else <directory>-<4 hex>)."`
	Tools string `enum:"claudemesh,agent-mail" default:"claudemesh" help:"The tools served: claudemesh's own, or agent-mail (MCP Agent Mail's tool names and arguments, for agents prompted for it)."`
}

// Run serves MCP on stdin/stdout (cmd/internal/mcpserver; claudemesh-mcp is
// the same server in a binary of its own).
func (c *mcpCmd) Run() error {
	if err := sysmon.KeepAwake(); err != nil {
		fmt.Fprintln(os.Stderr, "claudemesh mcp:", err) // it serves on, its monitor sleeping deeply
	}
	paths, err := config.ResolvePaths()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	return (&mcpserver.MCP{Mesh: c.Mesh, Name: c.Name, Tools: mcpserver.ToolSet(c.Tools), Version: version}).Serve(paths)
}
