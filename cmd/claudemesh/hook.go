package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages/hookevent"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/persistence/hookoutbox"
)

type hookCmd struct {
	Install   hookInstallCmd   `cmd:"" help:"Add the receiver to Claude Code's hooks (~/.claude/settings.json), keeping every other setting and hook."`
	Uninstall hookUninstallCmd `cmd:"" help:"Remove the receiver from Claude Code's hooks."`
	Receive   hookReceiveCmd   `cmd:"" default:"withargs" help:"Receive one hook event: what the installed hooks run, as claudemesh hook <event> (receive may be left out). Reads the JSON on stdin, appends a row to hooks.db, exits 0."`
}

// hookReceiveCmd is `claudemesh hook <agent-event> [--agent claude|codex]`.
// main runs it without kong when the command line is that plain
// (hookFastPath); kong serves the rest (help, odd spellings).
type hookReceiveCmd struct {
	Event   string `arg:"" optional:"" help:"The agent's event name (Claude Code: SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop, SubagentStop, Notification). Codex's notify passes its JSON here instead."`
	Payload string `arg:"" optional:"" help:"The event's JSON, when the agent passes it as an argument (Codex); else it is read from stdin."`
	Agent   string `default:"claude" enum:"claude,codex" help:"The agent that runs the hook."`
}

func (c *hookReceiveCmd) Run() error {
	receiveHook(c.Agent, c.Event, c.Payload, os.Stdin, os.Stderr)
	return nil
}

// hookFastPath runs `claudemesh hook <event> [--agent A] [payload]`
// before kong is built: the receiver runs at every tool call and must not
// pay for the parser of the whole CLI. It reports false for anything else
// (a subcommand, a help flag, an unknown flag), which kong then parses.
func hookFastPath(args []string) bool {
	agent, positional := hookevent.Claude, []string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--agent" && i+1 < len(args):
			agent = args[i+1]
			i++
		case strings.HasPrefix(a, "--agent="):
			agent = strings.TrimPrefix(a, "--agent=")
		case strings.HasPrefix(a, "-"):
			return false
		default:
			positional = append(positional, a)
		}
	}
	if len(positional) == 0 || len(positional) > 2 || positional[0] == "install" || positional[0] == "uninstall" ||
		positional[0] == "receive" || agent != hookevent.Claude && agent != hookevent.Codex {
		return false
	}
	payload := ""
	if len(positional) == 2 {
		payload = positional[1]
	}
	receiveHook(agent, positional[0], payload, os.Stdin, os.Stderr)
	return true
}

// receiveHook wires the receiver (hookoutbox.Receiver, which does the
// work) to the daemon directory and the agent's environment.
func receiveHook(agent, event, payload string, stdin io.Reader, stderr io.Writer) {
	now := time.Now()
	paths, err := config.ResolvePaths()
	if err != nil {
		fmt.Fprintf(stderr, "claudemesh hook: %v (event not recorded)\n", err)
		return
	}
	r := hookoutbox.Receiver{DB: paths.HooksDB(), Wake: paths.HookWake(), Errors: paths.HookErrors(),
		Create: func(ctx context.Context, path string) error {
			if err := paths.EnsureDaemonDir(); err != nil {
				return err
			}
			return persistence.CreateHooks(ctx, path)
		},
		Env: hookevent.Env{SessionID: os.Getenv(envSessionID), Mesh: os.Getenv(envMesh), DisplayName: os.Getenv(envDisplayName),
			PID: hookoutbox.AgentPID()},
		Stderr: stderr}
	r.Receive(agent, event, payload, stdin, now)
}

// envClaudeSessionID is the session id Claude Code puts in the environment
// of its hooks and (since 2.1.154) of its stdio MCP servers: the hook
// JSON's session_id. `claudemesh mcp` registers under it, so that the
// hooks' events and the MCP server's session are one peer.
const envClaudeSessionID = "CLAUDE_CODE_SESSION_ID"
