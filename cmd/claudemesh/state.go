package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// stateCmd is `claudemesh state`: the mesh's shared state through the
// daemon, which relays each request to the broker (ours or upstream's).
type stateCmd struct {
	Get  stateGetCmd  `cmd:"" help:"Print a key of the mesh's state: its JSON value, version and who set it when."`
	Set  stateSetCmd  `cmd:"" help:"Set a key of the mesh's state to a JSON value; every other connection of the mesh is told (state_change)."`
	List stateListCmd `cmd:"" help:"List every key of the mesh's state."`
}

type stateGetCmd struct {
	Key string `arg:"" help:"The key: 1-256 bytes of UTF-8, no control characters."`
	topicFlags
}

func (c *stateGetCmd) Run() error {
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.StateGot, error) {
		return client.State(ctx, c.Mesh, c.Key)
	}, func(res *messages.StateGot) error {
		s := res.State
		fmt.Printf("%s = %s\n(version %d, set by %s at %s, mesh %s)\n", printable(s.Key), printable(string(s.Value)), s.Version,
			printable(s.UpdatedBy), stamp(s.UpdatedAt), res.State.Mesh)
		return nil
	})
}

type stateSetCmd struct {
	Key       string `arg:"" help:"The key: 1-256 bytes of UTF-8, no control characters."`
	Value     string `arg:"" help:"The value, as JSON (at most 64 KiB): a string is quoted, e.g. '\"red\"'; 42, true, null, {...} and [...] as they are."`
	IfVersion *int64 `name:"if-version" placeholder:"N" help:"Compare-and-set: set only if the key is at version N (0: only if it does not exist yet); otherwise nothing is set and the current version and value are reported."`
	topicFlags
}

func (c *stateSetCmd) Run() error {
	if !json.Valid([]byte(c.Value)) {
		return fmt.Errorf("the value %s is not JSON: quote a string ('\"%s\"'), or give a number, true, false, null, an object or an array",
			strconv.Quote(c.Value), c.Value)
	}
	req := &messages.StateSetRequest{Key: c.Key, Value: json.RawMessage(c.Value), IfVersion: c.IfVersion, Mesh: c.Mesh}
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.StateSetDone, error) {
		return client.SetState(ctx, req)
	}, func(res *messages.StateSetDone) error {
		if res.Version == 0 {
			fmt.Printf("%s set (mesh %s; its broker reports no versions)\n", printable(res.Key), res.Mesh)
			return nil
		}
		fmt.Printf("%s set: version %d (mesh %s)\n", printable(res.Key), res.Version, res.Mesh)
		return nil
	})
}

type stateListCmd struct {
	topicFlags
}

func (c *stateListCmd) Run() error {
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.StateList, error) {
		return client.StateList(ctx, c.Mesh)
	}, func(res *messages.StateList) error {
		return printList(res.Entries, false, "no state in mesh "+res.Mesh+" (set a key with `claudemesh state set KEY JSON`)",
			"KEY\tVERSION\tVALUE\tSET BY\tAT", func(e messages.StateInfo) string {
				return row(e.Key, strconv.FormatInt(e.Version, 10), string(e.Value), e.UpdatedBy, stamp(e.UpdatedAt))
			})
	})
}
