package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

type peersCmd struct {
	Mesh string `placeholder:"SLUG" help:"Only this mesh's peers (default: every mesh the daemon serves, each once)."`
	JSON bool   `name:"json" help:"Print the peers as one JSON array."`
}

// Run lists the peers the daemon's brokers report (GET /v1/peers): the
// names and keys `claudemesh send` takes. With --json each peer names the
// daemon that answered.
func (c *peersCmd) Run() error {
	client, d, err := connectDaemon("claudemesh peers", "peers")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	peers, failed, err := client.PeersReport(ctx, c.Mesh)
	if err != nil {
		return err
	}
	for _, slug := range slices.Sorted(maps.Keys(failed)) {
		fmt.Fprintf(os.Stderr, "mesh %s is not listed: %s\n", printable(slug), printable(failed[slug]))
	}
	if len(peers) == 0 && len(failed) > 0 {
		return errors.New("no broker answered for the peer list; `claudemesh daemon status` shows each mesh's connection")
	}
	var live map[string]*messages.AgentState
	if d.Kind == ipc.DaemonOurs { // hook_status.go: the local sessions' live state, ours alone keeps
		live = liveStates(ctx, client)
	}
	list := withLive(peers, live)
	if c.JSON {
		out, err := listWithDaemon(list, d)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(out)
	}
	return printList(list, false, "no peers (no member or session of the daemon's meshes is known to their brokers)", "MESH\tNAME\tPUBKEY\tSTATUS\tSTATE\tDOING\tSUMMARY", func(p livePeer) string {
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

// meshPeers is the daemon's peer list of mesh (of every mesh when mesh is
// empty), as messages.ResolvePeer takes it.
func meshPeers(ctx context.Context, client *ipc.Client, mesh string) ([]messages.Peer, error) {
	peers, err := client.Peers(ctx, mesh)
	if err != nil {
		return nil, err
	}
	list := make([]messages.Peer, len(peers))
	for i := range peers {
		list[i] = peers[i].Peer
	}
	return list, nil
}
