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
	live := liveStates(ctx, client) // hook_status.go: the local sessions' live state
	return printList(withLive(peers, live), c.JSON, "no peers (no member or session of the daemon's meshes is known to their brokers)", "MESH\tNAME\tPUBKEY\tSTATUS\tSTATE\tDOING\tSUMMARY", func(p livePeer) string {
		return row(p.Mesh, p.DisplayName, p.Pubkey, p.Status, p.state(), p.doing(), p.Summary)
	})
}

// printList prints items as one JSON array, or as a table (header, then a
// tab-separated line per item, made with row so that what the mesh wrote
// is printable), or empty when there are none.
func printList[T any](items []T, asJSON bool, empty, header string, line func(T) string) error {
	if asJSON {
		return json.NewEncoder(os.Stdout).Encode(items)
	}
	if len(items) == 0 {
		fmt.Println(empty)
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		fmt.Fprintln(tw, line(it))
	}
	return tw.Flush()
}
