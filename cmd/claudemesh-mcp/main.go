// Command claudemesh-mcp is `claudemesh mcp` in a binary of its own: the
// MCP server an agent (Claude Code) runs on stdin/stdout, linking only
// the server and the daemon's client, so that it answers the agent's
// first tool call sooner (it starts in less than half of claudemesh's
// time). `claudemesh install claude-code` registers it when it is
// installed beside claudemesh (`go install ./cmd/...`); it starts the
// daemon with that claudemesh when none answers.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/claudemesh/claudemesh-go/cmd/internal/mcpserver"
	"github.com/claudemesh/claudemesh-go/cmd/internal/sysmon"
	"github.com/claudemesh/claudemesh-go/config"
)

// version is set at build time with -ldflags "-X main.version=…", as
// claudemesh's is.
var version = "0.1.0-dev"

func main() {
	fs := flag.NewFlagSet("claudemesh-mcp", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: claudemesh-mcp [--mesh SLUG] [--name NAME] [--tools claudemesh|agent-mail]\n\n"+
			"Serves the Model Context Protocol on stdin/stdout for an AI agent (Claude Code):\n"+
			"tools to message peers, and arriving messages pushed live. The same as `claudemesh mcp`.\n\n")
		fs.PrintDefaults()
	}
	m := mcpserver.MCP{Version: version}
	fs.StringVar(&m.Mesh, "mesh", "", "mesh the session joins (default: CLAUDEMESH_MESH, else the daemon's only mesh, identities of daemon add-agent aside)")
	fs.StringVar(&m.Name, "name", "", "display name peers see (default: CLAUDEMESH_DISPLAY_NAME, else <directory>-<4 hex>)")
	tools := fs.String("tools", string(mcpserver.ToolsClaudemesh), "the tools served: claudemesh's own, or agent-mail (MCP Agent Mail's tool names and arguments, for agents prompted for it)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	var err error
	if m.Tools, err = mcpserver.ParseToolSet(*tools); err != nil {
		fmt.Fprintln(os.Stderr, "claudemesh-mcp:", err)
		os.Exit(2)
	}
	if *showVersion {
		fmt.Println(version)
		return
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "claudemesh-mcp: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		os.Exit(2)
	}
	if err := sysmon.KeepAwake(); err != nil {
		fmt.Fprintln(os.Stderr, "claudemesh-mcp:", err) // it serves on, its monitor sleeping deeply
	}
	paths, err := config.ResolvePaths()
	if err != nil {
		fmt.Fprintln(os.Stderr, "claudemesh-mcp:", err)
		os.Exit(2)
	}
	if exe, err := os.Executable(); err == nil {
		m.Claudemesh = filepath.Join(filepath.Dir(exe), "claudemesh") // starts the daemon
	}
	if err := m.Serve(paths); err != nil {
		fmt.Fprintln(os.Stderr, "claudemesh-mcp:", err)
		os.Exit(1)
	}
}
