package main

import (
	"context"
	"strconv"
	"time"

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
	return printList(list, c.JSON, "no agent sessions registered (claudemesh mcp and claudemesh launch register them)",
		"MESH\tNAME\tSESSION\tPID\tPUBKEY\tREGISTERED", func(s messages.SessionInfo) string {
			return row(s.Mesh, s.DisplayName, s.SessionID, strconv.Itoa(s.PID), short(s.Presence.SessionPubkey, 16),
				time.UnixMilli(s.RegisteredAt).UTC().Format(time.RFC3339))
		})
}
