package main

import (
	"os"

	"github.com/claudemesh/claudemesh-go/cmd/internal/hookcmd"
)

type hookCmd struct {
	Install   hookInstallCmd   `cmd:"" help:"Add the receiver to Claude Code's hooks (~/.claude/settings.json), keeping every other setting and hook."`
	Uninstall hookUninstallCmd `cmd:"" help:"Remove the receiver from Claude Code's hooks."`
	Receive   hookReceiveCmd   `cmd:"" default:"withargs" help:"Receive one hook event: what the installed hooks run, as claudemesh hook <event> (receive may be left out). Reads the JSON on stdin, appends a row to hooks.db, exits 0 (at SessionStart, printing the session's context for Claude Code)."`
}

// hookReceiveCmd is `claudemesh hook <agent-event> [--agent claude|codex]`.
// main runs it without kong when the command line is that plain
// (hookcmd.Run); kong serves the rest (help, odd spellings).
type hookReceiveCmd struct {
	Event   string `arg:"" optional:"" help:"The agent's event name (Claude Code: SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop, SubagentStop, Notification, SessionEnd). Codex's notify passes its JSON here instead."`
	Payload string `arg:"" optional:"" help:"The event's JSON, when the agent passes it as an argument (Codex); else it is read from stdin."`
	Agent   string `default:"claude" enum:"claude,codex" help:"The agent that runs the hook."`
}

func (c *hookReceiveCmd) Run() error {
	hookcmd.Receive(c.Agent, c.Event, c.Payload, os.Stdin, os.Stdout, os.Stderr)
	return nil
}
