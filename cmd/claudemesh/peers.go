package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"
	"time"
)

type peersCmd struct {
	Mesh string `placeholder:"SLUG" help:"Only this mesh's peers (default: every mesh the daemon serves)."`
	JSON bool   `name:"json" help:"Print the peers as one JSON array."`
}

// Run lists the peers the daemon's brokers report (GET /v1/peers): the
// names and keys `claudemesh send` takes.
func (c *peersCmd) Run() error {
	client, err := daemonClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	peers, err := client.Peers(ctx, c.Mesh)
	if err != nil {
		return err
	}
	if c.JSON {
		return json.NewEncoder(os.Stdout).Encode(peers)
	}
	if len(peers) == 0 {
		fmt.Println("no peers connected")
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MESH\tNAME\tPUBKEY\tSTATUS\tSUMMARY")
	for _, p := range peers {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Mesh, p.DisplayName, p.Pubkey, p.Status, p.Summary)
	}
	return tw.Flush()
}
