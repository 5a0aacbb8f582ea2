package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/claudemesh/claudemesh-go/cmd/internal/mcpserver"
	"github.com/claudemesh/claudemesh-go/messages"
)

type sessionsCmd struct {
	JSON bool `name:"json" help:"Print the sessions as one JSON array."`
}

// Run lists the agent sessions registered with the daemon (GET
// /v1/sessions): each is a peer of its own on its mesh.
func (c *sessionsCmd) Run() error {
	client, err := daemonClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := client.Sessions(ctx)
	if err != nil {
		return err
	}
	return printSessions(list, c.JSON)
}

// printSessions prints the sessions as `claudemesh sessions` does: a
// table, or one JSON array.
func printSessions(list []messages.SessionInfo, asJSON bool) error {
	return printList(list, asJSON, "no agent sessions registered (claudemesh mcp and claudemesh launch register them)",
		"MESH\tNAME\tSESSION\tPID\tPUBKEY\tREGISTERED", func(s messages.SessionInfo) string {
			return row(s.Mesh, s.DisplayName, s.SessionID, strconv.Itoa(s.PID), short(s.Presence.SessionPubkey, 16),
				stampTime(time.UnixMilli(s.RegisteredAt)))
		})
}

// sessionRefusal is the daemon's refusal of the agent session this shell
// runs in, in the command line's words: what to do about it, for any
// command that acts as the session (the daemon's own words name an API
// route). "" for any other error.
func sessionRefusal(err error) string {
	var me *messages.Error
	if !errors.As(err, &me) {
		return ""
	}
	src := mcpserver.SessionSource()
	switch me.Code {
	case messages.CodeSessionUnknown:
		return fmt.Sprintf("%s: this shell belongs to an agent session (%s) that the daemon no longer knows: it ended, or its process is gone. "+
			"Run the command in a live session (claudemesh launch starts one), or unset %s to act as this machine's own identity",
			me.Code, src, src)
	case messages.CodeSessionNotConnected:
		return fmt.Sprintf("%s: this shell's agent session (%s) is not attached to its mesh right now (the daemon is attaching it, "+
			"or it has just ended); run the command again in a moment", me.Code, src)
	}
	return ""
}
