package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// rememberCmd, recallCmd and forgetCmd are the mesh's searchable memory
// through the daemon, which relays each to the broker. They share the
// topic commands' flags and runner (topic.go).

type rememberCmd struct {
	Text string   `arg:"" help:"What to remember (up to 64 KiB): any agent of the mesh can recall it."`
	Tag  []string `name:"tag" sep:"none" placeholder:"TAG" help:"A tag to recall it by (repeat for several, up to 16)."`
	topicFlags
}

func (c *rememberCmd) Run() error {
	req := &messages.RememberRequest{Content: c.Text, Tags: c.Tag, Mesh: c.Mesh}
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.Remembered, error) {
		return client.Remember(ctx, req)
	}, func(res *messages.Remembered) error {
		fmt.Printf("remembered %s (mesh %s); forget it with `claudemesh forget %s`\n", res.ID, res.Mesh, res.ID)
		return nil
	})
}

type recallCmd struct {
	Query string   `arg:"" optional:"" help:"Words to search for, ranked by relevance (the exact phrase first); quotes and operators are plain text. Empty: the newest memories."`
	Tag   []string `name:"tag" sep:"none" placeholder:"TAG" help:"Only memories with this tag (repeat: with every one)."`
	Limit int      `default:"20" help:"At most this many memories (1-100)."`
	topicFlags
}

func (c *recallCmd) Run() error {
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.MemoryMatches, error) {
		return client.Recall(ctx, c.Mesh, c.Query, c.Tag, c.Limit)
	}, func(res *messages.MemoryMatches) error {
		if len(res.Matches) == 0 {
			fmt.Printf("nothing remembered in mesh %s matches (remember something with `claudemesh remember TEXT`)\n", res.Mesh)
			return nil
		}
		for _, m := range res.Matches {
			by := m.RememberedByName
			if by == "" {
				by = m.RememberedBy
			}
			tags := ""
			if len(m.Tags) > 0 {
				tags = " [" + printable(strings.Join(m.Tags, ", ")) + "]"
			}
			fmt.Printf("%s  %s by %s%s\n%s\n\n", m.ID, stamp(m.RememberedAt), printable(by), tags, printableLines(m.Content))
		}
		return nil
	})
}

type forgetCmd struct {
	ID string `arg:"" help:"The memory's id, as remember or recall print it."`
	topicFlags
}

func (c *forgetCmd) Run() error {
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.Forgotten, error) {
		return client.Forget(ctx, c.Mesh, c.ID)
	}, func(res *messages.Forgotten) error {
		fmt.Printf("forgot %s (mesh %s): no recall finds it any more\n", res.ID, res.Mesh)
		return nil
	})
}
