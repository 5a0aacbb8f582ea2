package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
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

// receiveHook is the receiver (spec "Receiver"): it reads the hook's JSON
// (the payload argument, else stdin), normalises it, drops an event no
// handler takes, appends one row to hooks.db and pokes the daemon. It
// never fails the hook: a failure is one line on stderr, recorded in
// hooks.errors for the daemon to count.
func receiveHook(agent, event, payload string, stdin io.Reader, stderr io.Writer) {
	now := time.Now()
	if strings.HasPrefix(strings.TrimSpace(event), "{") { // Codex's notify: the JSON is the only argument
		event, payload = "", event
	}
	paths, err := config.ResolvePaths()
	if err != nil {
		fmt.Fprintf(stderr, "claudemesh hook: %v (event not recorded)\n", err)
		return
	}
	fail := func(err error) {
		where := "counted in " + paths.HookErrors()
		if rerr := hookoutbox.RecordFailure(paths.HookErrors(), now, agent, event, err); rerr != nil {
			where = "not counted: " + rerr.Error()
		}
		fmt.Fprintf(stderr, "claudemesh hook: %v (event not recorded; %s)\n", err, where)
	}
	raw := []byte(payload)
	if payload == "" {
		if raw, err = readHookInput(stdin); err != nil {
			fail(err)
			return
		}
	}
	row, err := hookevent.Normalize(agent, event, raw, hookevent.Env{SessionID: os.Getenv(envSessionID),
		Mesh: os.Getenv(envMesh), DisplayName: os.Getenv(envDisplayName), PID: agentPID()})
	if errors.Is(err, hookevent.ErrDropped) {
		return
	}
	if err != nil {
		fail(err)
		return
	}
	w, err := hookoutbox.Open(paths.HooksDB(), func(ctx context.Context, path string) error {
		if err := paths.EnsureDaemonDir(); err != nil {
			return err
		}
		return persistence.CreateHooks(ctx, path)
	})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*hookoutbox.BusyTimeout)
		err = w.Append(ctx, hookoutbox.Row{SessionID: row.SessionID, Agent: row.Agent, EventType: row.EventType,
			Payload: row.Payload}, now)
		cancel()
	}
	if err != nil {
		fail(err)
		return
	}
	_ = hookoutbox.Poke(paths.HookWake()) // a daemon that is down reads the row when it starts
	// w is not closed: see hookoutbox.Writer.Close.
}

// readHookInput reads the hook's JSON from stdin, at most
// hookevent.MaxInput bytes (a tool's output can be large; the rest is
// drained so that the agent's write does not fail).
func readHookInput(stdin io.Reader) ([]byte, error) {
	if f, ok := stdin.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return nil, errors.New("no hook JSON: the receiver reads it on stdin (the agent's hook pipes it there)")
		}
	}
	raw, err := io.ReadAll(io.LimitReader(stdin, hookevent.MaxInput+1))
	if err != nil {
		return nil, fmt.Errorf("read the hook JSON: %w", err)
	}
	if len(raw) > hookevent.MaxInput {
		_, _ = io.Copy(io.Discard, stdin)
	}
	return raw, nil
}

// shells are the programs an agent may run a hook command through; the
// agent is the shell's parent.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "fish": true, "ksh": true}

// agentPID is the agent's process: the hook's parent, or its grandparent
// when the parent is the shell the agent ran the hook command with. A
// session the hook registers is tied to it (the daemon's reaper drops the
// session when it exits). Without /proc it is the parent.
func agentPID() int {
	ppid := os.Getppid()
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/comm")
	if err != nil || !shells[strings.TrimSpace(string(comm))] {
		return ppid
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/stat")
	if err != nil {
		return ppid
	}
	// pid (comm) state ppid …: comm may hold spaces and parentheses.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 2 {
		return ppid
	}
	if gp, err := strconv.Atoi(fields[1]); err == nil && gp > 1 {
		return gp
	}
	return ppid
}

// envClaudeSessionID is the session id Claude Code puts in the environment
// of its hooks and (since 2.1.154) of its stdio MCP servers: the hook
// JSON's session_id. `claudemesh mcp` registers under it, so that the
// hooks' events and the MCP server's session are one peer.
const envClaudeSessionID = "CLAUDE_CODE_SESSION_ID"
