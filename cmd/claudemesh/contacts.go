package main

import (
	"context"
	"fmt"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// contactsCmd is `claudemesh contacts`: the contact policy of the calling
// agent session (outside one, of the mesh's membership) and the contact
// requests it holds. The daemon applies it to the direct messages it
// receives; the senders are told what became of theirs.
type contactsCmd struct {
	Policy   contactsPolicyCmd   `cmd:"" help:"Set who may send you direct messages: open (anyone; the default), auto (anyone, and a stranger's first message makes it a contact), contacts_only (a stranger's messages wait as a contact request), block_all (nobody)."`
	Requests contactsRequestsCmd `cmd:"" help:"List the pending contact requests: each stranger's held messages, and when the request expires."`
	Accept   contactsDecideCmd   `cmd:"" help:"Accept a contact request: its messages land in your inbox, the sender becomes a contact and is told."`
	Refuse   contactsRefuseCmd   `cmd:"" help:"Refuse a contact request: its messages are dropped and the sender is told."`
	List     contactsListCmd     `cmd:"" help:"Print your contact policy and contacts (the peers you wrote to, accepted or let in under auto)."`
}

type contactsPolicyCmd struct {
	Policy     string        `arg:"" enum:"open,auto,contacts_only,block_all" help:"open, auto, contacts_only or block_all."`
	RequestTTL time.Duration `name:"request-ttl" placeholder:"DURATION" help:"How long a contact request waits under contacts_only before it runs out and its sender is told (1m to 2160h, which is 90 days; default: as before, else 168h)."`
	topicFlags
}

func (c *contactsPolicyCmd) Run() error {
	req := &messages.ContactPolicyRequest{Mesh: c.Mesh, Policy: c.Policy}
	if c.RequestTTL != 0 {
		req.RequestTTL = c.RequestTTL.String()
	}
	if err := req.Validate(); err != nil {
		return usageErr("%v", err)
	}
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.Contacts, error) {
		return client.SetContactPolicy(ctx, req)
	}, func(res *messages.Contacts) error {
		printPolicy(res)
		return nil
	})
}

func printPolicy(c *messages.Contacts) {
	fmt.Printf("contact policy of %s: %s (contact requests wait %s)\n", printable(c.Mesh), c.Policy, c.RequestWait())
}

type contactsRequestsCmd struct{ topicFlags }

func (c *contactsRequestsCmd) Run() error {
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.ContactRequests, error) {
		return client.ContactRequests(ctx, c.Mesh)
	}, func(res *messages.ContactRequests) error {
		if len(res.Requests) == 0 {
			fmt.Println("no pending contact request")
		}
		for _, r := range res.Requests {
			fmt.Printf("%s (%s): %d message(s), until %s\n", printable(r.Name), r.Pubkey, len(r.Messages), stamp(r.Until))
			for i := range r.Messages {
				fmt.Println("  " + inboxEntry(&r.Messages[i]))
			}
		}
		return nil
	})
}

type contactsDecideCmd struct {
	Peer string `arg:"" help:"The request's sender: its pubkey, a pubkey prefix (8+ hex) or its name."`
	topicFlags
}

func (c *contactsDecideCmd) Run() error { return decideContact(c.topicFlags, c.Peer, true) }

type contactsRefuseCmd struct{ contactsDecideCmd }

func (c *contactsRefuseCmd) Run() error { return decideContact(c.topicFlags, c.Peer, false) }

func decideContact(f topicFlags, peer string, accept bool) error {
	req := &messages.ContactDecisionRequest{Mesh: f.Mesh, Peer: peer}
	return topicRun(f, func(ctx context.Context, client *ipc.Client) (*messages.ContactDecided, error) {
		res, err := client.DecideContact(ctx, req, accept)
		return res, mailError(err, peer)
	}, func(res *messages.ContactDecided) error {
		what := "dropped"
		if accept {
			what = "now in your inbox"
		}
		fmt.Printf("%s the contact request of %s (%s): %d message(s) %s; the sender is told\n", res.Decision,
			printable(res.Name), res.Pubkey, len(res.Messages), what)
		return nil
	})
}

type contactsListCmd struct{ topicFlags }

// Run names each contact as the peer list does where the daemon has only a
// key's prefix for it (one written to before it said its name), --json too.
func (c *contactsListCmd) Run() error {
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.Contacts, error) {
		res, err := client.Contacts(ctx, c.Mesh)
		if err == nil {
			names := client.PeerNames(ctx, c.Mesh, len(res.Contacts))
			for i := range res.Contacts {
				res.Contacts[i].Name = res.Contacts[i].DisplayName(names)
			}
		}
		return res, err
	}, func(res *messages.Contacts) error {
		printPolicy(res)
		if len(res.Contacts) == 0 {
			fmt.Println("no contacts")
		}
		for _, k := range res.Contacts {
			fmt.Printf("  %-24s %s  %-8s since %s\n", printable(k.Name), k.Pubkey, k.Via, stamp(k.AddedAt))
		}
		return nil
	})
}
