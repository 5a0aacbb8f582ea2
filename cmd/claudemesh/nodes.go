package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// nodesCmd is `claudemesh nodes`: the mesh's daemons as its broker lists
// them (GET /v1/nodes).
type nodesCmd struct {
	topicFlags
}

func (c *nodesCmd) Run() error {
	client, _, err := connectDaemon("claudemesh nodes", "nodes")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := client.Nodes(ctx, c.Mesh)
	if err != nil {
		return err
	}
	if c.JSON {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	now := time.Now()
	err = printList(res.Nodes, false, "no daemon has connected to mesh "+res.Mesh+" yet",
		"NAME\tHOST\tVERSION\tSTATE\tLAST SEEN", func(n messages.NodeInfo) string {
			return row(n.Name, cmp.Or(n.Host, "unknown"), cmp.Or(n.Version, "unknown"), n.State, ago(now, n.LastSeenAt))
		})
	if err == nil && len(res.Nodes) > 0 {
		fmt.Printf("(mesh %s; a daemon unheard for %s is stale)\n", res.Mesh, time.Duration(res.StaleAfterMs)*time.Millisecond)
	}
	return err
}

// ago says how long before now the RFC 3339 time at was, in whole
// seconds ("4s ago", "2m10s ago"), or at as it is when it does not parse.
func ago(now time.Time, at string) string {
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return at
	}
	return max(now.Sub(t), 0).Round(time.Second).String() + " ago"
}
