// Command claudemesh-hook is the agent-hook receiver alone:
// `claudemesh-hook <event> [--agent claude|codex] [payload]` does what
// `claudemesh hook <event>` does — appends the event to hooks.db for the
// daemon and exits 0, also when the daemon is down — in a binary that
// links only the receiver, so that it starts in a third of the time (the
// agent runs it at every tool call). `claudemesh hook install` and
// `claudemesh install claude-code` use it when it is installed beside
// claudemesh (`go install ./cmd/...`).
package main

import (
	"fmt"
	"os"

	"github.com/claudemesh/claudemesh-go/cmd/internal/hookcmd"
)

const usage = `usage: claudemesh-hook <agent-event> [--agent claude|codex] [payload]

Receives one agent hook event: reads the hook's JSON on stdin (Codex: the
payload argument), appends it to hooks.db for the claudemesh daemon, pokes
the daemon and exits 0, also when the daemon is down. At Claude Code's
SessionStart it prints the session's context for the agent (unread
messages, reservations and locks) when the daemon has any to tell.
Install it in Claude Code's hooks with ` + "`claudemesh hook install`" + `.
`

func main() {
	if !hookcmd.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr) {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
}
