package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// topicCmd is `claudemesh topic`: the mesh's topics through the daemon,
// which relays each request to the broker (ours or upstream's).
type topicCmd struct {
	Create  topicCreateCmd  `cmd:"" help:"Create a topic and join it as its lead; a name the mesh already has answers that topic, joined as a member."`
	List    topicListCmd    `cmd:"" help:"List the mesh's topics: the names and ids send takes as #name or #id."`
	Join    topicJoinCmd    `cmd:"" help:"Join a topic (by name or id): what is sent to it reaches you from then on."`
	Leave   topicLeaveCmd   `cmd:"" help:"Leave a topic (by name or id)."`
	Members topicMembersCmd `cmd:"" help:"List a topic's members and their roles."`
	History topicHistoryCmd `cmd:"" help:"Print a topic's messages (the newest --limit, oldest first)."`
}

// topicFlags are every topic command's.
type topicFlags struct {
	Mesh string `placeholder:"SLUG" help:"The mesh (default: the daemon's only mesh; inside an agent session, the session's)."`
	JSON bool   `name:"json" help:"Print the daemon's answer as one JSON object."`
}

// topicRun makes one request of the daemon and prints its answer: as JSON
// with --json, else with text.
func topicRun[T any](f topicFlags, call func(context.Context, *ipc.Client) (*T, error), text func(*T) error) error {
	return topicRunWithin(f, 20*time.Second, call, text)
}

// topicRunWithin is topicRun with a deadline of its own.
func topicRunWithin[T any](f topicFlags, timeout time.Duration, call func(context.Context, *ipc.Client) (*T, error), text func(*T) error) error {
	client, err := daemonClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := call(ctx, client)
	if err != nil {
		return err
	}
	if f.JSON {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	return text(res)
}

type topicCreateCmd struct {
	Name        string `arg:"" help:"The topic's name: 1-64 of A-Z a-z 0-9 _ . / - (send to it as #name)."`
	Description string `help:"What the topic is for."`
	Visibility  string `default:"public" enum:"public,private,dm" help:"public, private or dm (recorded and listed; the broker does not enforce it)."`
	topicFlags
}

func (c *topicCreateCmd) Run() error {
	req := &messages.TopicCreateRequest{Name: c.Name, Description: c.Description, Visibility: c.Visibility, Mesh: c.Mesh}
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.TopicCreated, error) {
		return client.CreateTopic(ctx, req)
	}, func(res *messages.TopicCreated) error {
		verb := "created"
		if !res.Created {
			verb = "exists; joined"
		}
		fmt.Printf("#%s %s (id %s, mesh %s)\n", printable(res.Topic.Name), verb, res.Topic.ID, res.Mesh)
		return nil
	})
}

type topicListCmd struct {
	topicFlags
}

func (c *topicListCmd) Run() error {
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.TopicList, error) {
		return client.Topics(ctx, c.Mesh)
	}, func(res *messages.TopicList) error {
		return printList(res.Topics, false, "no topics in mesh "+res.Mesh+" (create one with `claudemesh topic create NAME`)",
			"NAME\tID\tMEMBERS\tVISIBILITY\tDESCRIPTION", func(t messages.TopicInfo) string {
				return row(t.Name, t.ID, strconv.Itoa(t.MemberCount), t.Visibility, t.Description)
			})
	})
}

type topicJoinCmd struct {
	Topic string `arg:"" help:"The topic's name or id."`
	Role  string `default:"member" enum:"lead,member,observer" help:"lead, member or observer."`
	topicFlags
}

func (c *topicJoinCmd) Run() error {
	return membership(c.topicFlags, &messages.TopicMembershipRequest{Topic: c.Topic, Role: c.Role, Mesh: c.Mesh}, true)
}

type topicLeaveCmd struct {
	Topic string `arg:"" help:"The topic's name or id."`
	topicFlags
}

func (c *topicLeaveCmd) Run() error {
	return membership(c.topicFlags, &messages.TopicMembershipRequest{Topic: c.Topic, Mesh: c.Mesh}, false)
}

// membership joins or leaves and prints the members after it.
func membership(f topicFlags, req *messages.TopicMembershipRequest, join bool) error {
	verb := "left"
	if join {
		verb = "joined"
	}
	return topicRun(f, func(ctx context.Context, client *ipc.Client) (*messages.TopicMembers, error) {
		if join {
			return client.JoinTopic(ctx, req)
		}
		return client.LeaveTopic(ctx, req)
	}, func(res *messages.TopicMembers) error {
		fmt.Printf("%s #%s (mesh %s); %d members now\n", verb, printable(res.Topic), res.Mesh, len(res.Members))
		return nil
	})
}

type topicMembersCmd struct {
	Topic string `arg:"" help:"The topic's name or id."`
	topicFlags
}

func (c *topicMembersCmd) Run() error {
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.TopicMembers, error) {
		return client.TopicMembers(ctx, c.Mesh, c.Topic)
	}, func(res *messages.TopicMembers) error {
		return printList(res.Members, false, "#"+res.Topic+" has no members", "NAME\tROLE\tPUBKEY\tJOINED\tLAST READ",
			func(m messages.TopicMemberInfo) string {
				return row(m.DisplayName, m.Role, m.Pubkey, stamp(m.JoinedAt), stamp(messages.Deref(m.LastReadAt)))
			})
	})
}

type topicHistoryCmd struct {
	Topic  string `arg:"" help:"The topic's name or id."`
	Limit  int    `default:"50" help:"How many of the newest messages (1-500)."`
	Before string `placeholder:"ID" help:"Only messages older than this message id (the next page back)."`
	topicFlags
}

func (c *topicHistoryCmd) Run() error {
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.TopicHistory, error) {
		return client.TopicHistory(ctx, c.Mesh, c.Topic, c.Limit, c.Before)
	}, printHistory)
}

// printHistory prints a history page oldest first, as a conversation reads.
func printHistory(res *messages.TopicHistory) error {
	msgs := slices.Clone(res.Messages)
	slices.Reverse(msgs)
	return printList(msgs, false, "#"+res.Topic+" has no messages", "AT\tFROM\tID\tMESSAGE",
		func(m messages.TopicHistoryItem) string {
			from := m.SenderName
			if from == "" {
				from = m.SenderPubkey
			}
			body := "(not text: a v2 topic body)"
			if m.Body != nil {
				body = *m.Body
			}
			return row(stamp(m.CreatedAt), from, m.ID, body)
		})
}
