// Package hookcmd is the agent-hook receiver's command line, shared by
// `claudemesh hook <event>` and the lean `claudemesh-hook <event>`: it
// parses the arguments and wires the receiver (persistence/hookoutbox)
// to the daemon directory and the agent session's environment; at a
// SessionStart it also tells Claude Code what the session should know as
// it starts (context.go).
//
// It links no more than the receiver needs (config, the SQLite driver, the
// hooks.db schema, the daemon's IPC client), so that claudemesh-hook,
// which Claude Code starts at every tool call, pays for nothing else: see
// docs/BENCHMARKS.md.
package hookcmd

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

// Run receives one hook event when args are `<event> [--agent A]
// [payload]` (the receiver's command line after `hook`) and reports true;
// it reports false, doing nothing, for anything else (a subcommand such
// as install, a help flag, an unknown flag, no event), which the caller
// then parses or refuses.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) bool {
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
	Receive(agent, positional[0], payload, stdin, stdout, stderr)
	return true
}

// Receive runs the receiver for one event of agent: payload is the event's
// JSON when the agent passes it as an argument (Codex), else it is read
// from stdin. It never fails the hook (see hookoutbox.Receiver.Receive).
// What it prints on stdout is the hook's answer to the agent: at Claude
// Code's SessionStart, the session's context (writeStartContext).
func Receive(agent, event, payload string, stdin io.Reader, stdout, stderr io.Writer) {
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
		Env: hookevent.Env{SessionID: os.Getenv(config.EnvSessionID), Mesh: os.Getenv(config.EnvMesh),
			DisplayName: os.Getenv(config.EnvDisplayName), PID: agentPID()},
		Stderr: stderr}
	row, ok := r.Receive(agent, event, payload, stdin, now)
	if !ok || row.EventType != hookevent.SessionStart {
		return
	}
	if err := exportTokenFile(paths, row.SessionID); err != nil {
		fmt.Fprintf(stderr, "claudemesh hook: %v (the session's commands run without its token)\n", err)
	}
	if row.Agent == hookevent.Claude {
		writeStartContext(stdout, paths, row)
	}
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
	if gp, err := config.ParentPID(ppid); err == nil && gp > 1 {
		return gp
	}
	return ppid
}

// Environment of Claude Code's SessionStart hooks and of the agent's
// commands.
const (
	envClaudeEnvFile = "CLAUDE_ENV_FILE"           // lines `export K=V` it applies to the agent's shell
	envTokenFile     = "CLAUDEMESH_IPC_TOKEN_FILE" // mcpserver.EnvTokenFile
)

// exportTokenFile gives the agent's shell commands the session's token, as
// `claudemesh launch` gives its child: at SessionStart it appends
// `export CLAUDEMESH_IPC_TOKEN_FILE='<the session's token file>'` to
// Claude Code's CLAUDE_ENV_FILE, so that the commit guard (and the CLI)
// act as the session that runs them. The daemon writes the file when the
// session registers (config.Paths.SessionTokenFile). Under `claudemesh
// launch`, which set the variable already, and outside Claude Code,
// nothing is done.
func exportTokenFile(paths config.Paths, sessionID string) error {
	envFile := os.Getenv(envClaudeEnvFile)
	if envFile == "" || os.Getenv(envTokenFile) != "" || sessionID == "" {
		return nil
	}
	path := strings.ReplaceAll(paths.SessionTokenFile(sessionID), "'", `'\''`)
	f, err := os.OpenFile(envFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("export the session's token file: %w", err)
	}
	_, err = fmt.Fprintf(f, "export %s='%s'\n", envTokenFile, path)
	return errors.Join(err, f.Close())
}
