package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"
	"time"
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
	if c.JSON {
		return json.NewEncoder(os.Stdout).Encode(list)
	}
	if len(list) == 0 {
		fmt.Println("no agent sessions registered (claudemesh mcp and claudemesh launch register them)")
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MESH\tNAME\tSESSION\tPID\tPUBKEY\tREGISTERED")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.16s\t%s\n", s.Mesh, s.DisplayName, s.SessionID, s.PID, s.Presence.SessionPubkey,
			time.UnixMilli(s.RegisteredAt).UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}
