// Command hookreceiver is `claudemesh hook <event>` linked alone: the
// receiver (persistence/hookoutbox) and the SQLite driver, nothing of the
// daemon or of the CLI. BenchmarkHookReceiver builds it to measure what
// the receiver costs apart from the claudemesh binary's start-up; it is
// not shipped. It expects hooks.db to exist (no schema creation).
package main

import (
	"os"
	"path/filepath"
	"time"

	"github.com/claudemesh/claudemesh-go/messages/hookevent"
	"github.com/claudemesh/claudemesh-go/persistence/hookoutbox"
)

func main() {
	now := time.Now()
	dir := os.Getenv("CLAUDEMESH_DAEMON_DIR")
	r := hookoutbox.Receiver{DB: filepath.Join(dir, "hooks.db"), Wake: filepath.Join(dir, "hooks.wake"),
		Errors: filepath.Join(dir, "hooks.errors"), Env: hookevent.Env{PID: hookoutbox.AgentPID()}, Stderr: os.Stderr}
	r.Receive(hookevent.Claude, os.Args[1], "", os.Stdin, now)
}
