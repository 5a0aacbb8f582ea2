package mcpserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// daemonStartWait bounds how long an agent command waits for a daemon it
// started to answer.
const daemonStartWait = 10 * time.Second

// EnsureDaemon returns the answer of the daemon on paths' socket (the
// detection handshake of `claudemesh send`), starting one with `claudemesh
// daemon up` (detached) when none answers; claudemesh is the binary that
// starts it ("": this one). The started command's output goes to stderr:
// an MCP server's stdout carries only the protocol.
func EnsureDaemon(ctx context.Context, paths config.Paths, claudemesh string) (*messages.Version, error) {
	if v, err := ipc.ProbeOurs(paths.Socket()); err == nil {
		return v, nil
	}
	exe := claudemesh
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("no daemon answers on %s and this binary cannot be found to start one: %w", paths.Socket(), err)
		}
	}
	cmd := exec.CommandContext(ctx, exe, "daemon", "up")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// A concurrent start (another agent) makes this one fail with "already
	// running"; either way the answer on the socket decides.
	upErr := cmd.Run()
	deadline := time.Now().Add(daemonStartWait)
	for {
		if v, err := ipc.ProbeOurs(paths.Socket()); err == nil {
			return v, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("no daemon answers on %s (starting one: %v); start it with `claudemesh daemon up` and see `claudemesh daemon logs`",
				paths.Socket(), upErr)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond): // poll interval: the socket is asked again
		}
	}
}
