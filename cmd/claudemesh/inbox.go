package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// inboxCmd is `claudemesh inbox`: the messages received (its default, the
// listing of daemon inbox) and agent mail — threads, acknowledgements,
// search. Inside an agent session each acts as the session.
type inboxCmd struct {
	List        daemonInboxCmd      `cmd:"" default:"withargs" help:"Print the messages received (the default): the last 24 h, and with -f those that arrive."`
	Thread      inboxThreadCmd      `cmd:"" help:"Print a thread, oldest first: the messages received in it and those sent in it (subject, recipient, acknowledgements)."`
	Ack         inboxAckCmd         `cmd:"" help:"Acknowledge a message (by the id inbox prints with --json): a receipt goes back to its sender, once however often it is repeated."`
	Search      inboxSearchCmd      `cmd:"" help:"Search the subject and text of the messages received, best match first (the exact phrase first)."`
	AwaitingAck inboxAwaitingAckCmd `cmd:"" name:"awaiting-ack" help:"List the messages you sent that asked for an acknowledgement and have none yet."`
}

type inboxThreadCmd struct {
	ID string `arg:"" help:"The thread id (a message's thread_id, or the client_message_id of the message that started it)."`
	topicFlags
}

// threadView is a thread as --json prints it.
type threadView struct {
	Thread   string                `json:"thread"`
	Received []messages.InboxItem  `json:"received"`
	Sent     []messages.OutboxItem `json:"sent"`
	// names are the display names of the peers the daemon lists, by
	// pubkey: whom the sent messages went to.
	names map[string]string
}

func (c *inboxThreadCmd) Run() error {
	if c.ID == "" {
		return usageErr("the thread id is empty: give a message's thread_id, or the client_message_id of the message that started it")
	}
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*threadView, error) {
		v, err := loadThread(ctx, client, c.ID, c.Mesh)
		if err == nil {
			v.names = c.peerNames(ctx, client, len(v.Sent))
		}
		return v, err
	}, func(v *threadView) error {
		if len(v.Received)+len(v.Sent) == 0 {
			fmt.Printf("no message in thread %s\n", printable(v.Thread))
			return nil
		}
		for _, line := range threadLines(v) {
			fmt.Println(line)
		}
		return nil
	})
}

// loadThread reads a thread's received and sent messages.
func loadThread(ctx context.Context, client *ipc.Client, thread, mesh string) (*threadView, error) {
	q := url.Values{"thread": {thread}, "mark_seen": {"false"}, "limit": {"1000"}}
	if mesh != "" {
		q.Set("mesh", mesh)
	}
	in, err := client.Inbox(ctx, q)
	if err != nil {
		return nil, err
	}
	q.Del("mark_seen")
	q.Set("limit", "500")
	out, err := client.Outbox(ctx, q)
	if err != nil {
		return nil, err
	}
	slices.Reverse(out.Items) // oldest first, as the inbox
	return &threadView{Thread: thread, Received: in.Items, Sent: out.Items}, nil
}

// peerNames are the display names of the mesh's peers (every mesh's, for
// no --mesh) for the n lines about to name peers (ipc.Client.PeerNames);
// none asked for with --json, which prints keys.
func (f topicFlags) peerNames(ctx context.Context, client *ipc.Client, n int) map[string]string {
	if f.JSON {
		return nil
	}
	return client.PeerNames(ctx, f.Mesh, n)
}

// recipient is a sent message's destination for a line: the name the
// peer list gives its key, else the key's first 16 digits (a #topic, @group
// or * as it is).
func recipient(names map[string]string, to string) string {
	if name := names[strings.ToLower(to)]; name != "" {
		return printable(name)
	}
	return printable(short(to, 16))
}

// threadLines are a thread's messages, received and sent, in time order.
func threadLines(v *threadView) []string {
	type line struct {
		at   string
		text string
	}
	var lines []line
	for i := range v.Received {
		it := &v.Received[i]
		lines = append(lines, line{stamp(it.ReceivedAt), inboxEntry(it)})
	}
	for i := range v.Sent {
		it := &v.Sent[i]
		text := fmt.Sprintf("%s  %s  sent to %s  %s", stamp(it.EnqueuedAt), printable(it.Mesh), recipient(v.names, it.To), it.Status)
		if it.Body != nil {
			text += ": " + printable(*it.Body)
		}
		text += mailNote(it.Subject, it.Importance)
		if len(it.AckedBy) > 0 {
			names := make([]string, len(it.AckedBy))
			for j, a := range it.AckedBy {
				names[j] = printable(cmp.Or(a.Name, short(a.Pubkey, 12)))
			}
			text += "  acked by " + strings.Join(names, ", ")
		} else if it.AwaitsAck() {
			text += "  awaiting acknowledgement"
		}
		text += receiptNotes(it.Receipts)
		lines = append(lines, line{stamp(it.EnqueuedAt), text})
	}
	slices.SortStableFunc(lines, func(a, b line) int { return strings.Compare(a.at, b.at) })
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.text
	}
	return out
}

// inboxEntry is inboxLine with what the mail header adds: the subject,
// an importance above normal, and whether the sender asked for an
// acknowledgement — with the command that gives it, since only --json
// shows the id — or has one.
func inboxEntry(it *messages.InboxItem) string {
	s := inboxLine(it) + mailNote(it.Subject, it.Importance)
	switch {
	case it.AckedAt != nil:
		s += "  acknowledged"
	case it.AckRequired && it.HeldUntil != nil:
		s += "  asks for an acknowledgement, once you accept the request"
	case it.AckRequired:
		s += "  asks for an acknowledgement: claudemesh inbox ack " + it.ID
	}
	return s
}

// mailNote is a message's subject and importance, when it has them.
func mailNote(subject, importance string) string {
	note := ""
	if subject != "" {
		note += "  [" + printable(subject) + "]"
	}
	if importance != "" && importance != messages.ImportanceNormal {
		note += "  (" + importance + ")"
	}
	return note
}

// inboxAckCmd takes no --mesh: an inbox id names one message of any mesh.
type inboxAckCmd struct {
	ID   string `arg:"" help:"The message's inbox id (the id field of inbox --json, check_messages)."`
	JSON bool   `name:"json" help:"Print the daemon's answer as one JSON object."`
}

func (c *inboxAckCmd) Run() error {
	if strings.TrimSpace(c.ID) == "" {
		return usageErr("the inbox id is empty: give the id field of a message (claudemesh inbox --json shows it)")
	}
	return topicRun(topicFlags{JSON: c.JSON}, func(ctx context.Context, client *ipc.Client) (*messages.InboxAcked, error) {
		res, err := client.AckMessage(ctx, c.ID)
		return res, mailError(err, "")
	}, func(res *messages.InboxAcked) error {
		fmt.Printf("acknowledged %s (client_message_id %s) at %s; receipt %s %s\n", res.ID, printable(res.ClientMessageID),
			stamp(res.AckedAt), res.ReceiptClientMessageID, res.ReceiptStatus)
		return nil
	})
}

type inboxSearchCmd struct {
	Query string `arg:"" help:"The words to look for (quotes and operators are words too: nothing is syntax)."`
	Limit int    `default:"20" help:"Show at most this many messages (1-100)."`
	topicFlags
}

func (c *inboxSearchCmd) Run() error {
	switch {
	case c.Limit < 1 || c.Limit > messages.MaxSearchLimit:
		return usageErr("--limit must be 1-%d", messages.MaxSearchLimit)
	case len(c.Query) > messages.MaxSearchQueryBytes:
		return usageErr("the query is %d bytes; the limit is %d", len(c.Query), messages.MaxSearchQueryBytes)
	case len(messages.SearchTerms(c.Query, 1)) == 0:
		return usageErr("give a word to search for (letters or digits): %q has none", c.Query)
	}
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.InboxPage, error) {
		return client.SearchInbox(ctx, c.Query, c.Mesh, c.Limit)
	}, func(page *messages.InboxPage) error {
		if len(page.Items) == 0 {
			fmt.Printf("no message matches %q\n", printable(c.Query))
		}
		for i := range page.Items {
			fmt.Println(inboxEntry(&page.Items[i]))
		}
		return nil
	})
}

type inboxAwaitingAckCmd struct {
	OlderThan time.Duration `name:"older-than" default:"0s" help:"Only those sent longer ago than this (e.g. 10m)."`
	Limit     int           `default:"100" help:"Show at most this many (1-500), newest first."`
	topicFlags
}

func (c *inboxAwaitingAckCmd) Run() error {
	if c.OlderThan < 0 || c.Limit < 1 || c.Limit > 500 {
		return usageErr("--older-than must not be negative and --limit must be 1-500")
	}
	q := url.Values{"awaiting_ack": {"true"}, "older_than": {c.OlderThan.String()}, "limit": {fmt.Sprint(c.Limit)}}
	if c.Mesh != "" {
		q.Set("mesh", c.Mesh)
	}
	var names map[string]string
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.OutboxPage, error) {
		page, err := client.Outbox(ctx, q)
		if err == nil {
			names = c.peerNames(ctx, client, len(page.Items))
		}
		return page, err
	}, func(page *messages.OutboxPage) error {
		if len(page.Items) == 0 {
			fmt.Println("no message is waiting for an acknowledgement")
		}
		for _, it := range page.Items {
			fmt.Printf("%s  %s  to %s  %s  %s%s%s\n", stamp(it.EnqueuedAt), printable(it.ClientMessageID), recipient(names, it.To),
				it.Status, printable(it.Mesh), mailNote(it.Subject, it.Importance), receiptNotes(it.Receipts))
		}
		return nil
	})
}

// mailError says the daemon's refusals of a mail command in the command
// line's words (the API's name its routes); peer is the one a contacts
// decision named. Any other error is as it was.
func mailError(err error, peer string) error {
	var me *messages.Error
	if !errors.As(err, &me) {
		return err
	}
	switch me.Code {
	case messages.CodeInboxRowNotFound:
		return fmt.Errorf("%s: no such message in the inbox; give the id that claudemesh inbox --json prints for it", me.Code)
	case messages.CodeMessageHeld:
		return fmt.Errorf("%s: the message waits in a contact request from a stranger; accept the request first "+
			"(claudemesh contacts requests lists it, claudemesh contacts accept <peer> accepts it)", me.Code)
	case messages.CodeNoContactRequest:
		return fmt.Errorf("%s: no pending contact request from %s; claudemesh contacts requests lists them", me.Code, printable(peer))
	}
	return err
}
