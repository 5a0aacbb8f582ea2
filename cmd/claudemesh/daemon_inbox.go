package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
	"github.com/claudemesh/claudemesh-go/transport/ipcserver"
)

type daemonInboxCmd struct {
	Since      string `default:"24h" placeholder:"TIME" help:"Messages received since this time: a duration ago (90m, 24h, 168h) or an RFC 3339 time."`
	Mesh       string `placeholder:"SLUG" help:"Only this mesh's (this agent's) messages."`
	Topic      string `placeholder:"TOPIC" help:"Only this topic's messages (without the #)."`
	From       string `placeholder:"PEER" help:"Only messages from this sender: its pubkey, a pubkey prefix (8+ hex) or its name, as claudemesh peers lists them."`
	Limit      int    `default:"1000" help:"Show at most this many messages (the oldest of the window first)."`
	Thread     string `placeholder:"ID" help:"Only the messages of this thread (and the message that started it)."`
	Importance string `enum:",normal,high,urgent" default:"" help:"Only the messages of this importance: normal, high or urgent."`
	Unacked    bool   `help:"Only the messages that ask for an acknowledgement you have not given (claudemesh inbox ack)."`
	Follow     bool   `short:"f" help:"Then keep printing messages as they arrive, until interrupted."`
	JSON       bool   `name:"json" help:"Print each message as one JSON object per line, with the daemon that answered."`

	daemon *ipc.Daemon // the daemon that answers: ours or upstream's
	// topics are the names of the mesh's topics by id, for the live
	// messages of --follow, which carry the id alone (followTopics).
	topics map[string]string
}

func (c *daemonInboxCmd) Run() error {
	if c.Limit < 1 {
		return usageErr("--limit must be at least 1")
	}
	q := url.Values{}
	since, err := sinceParam(c.Since, time.Now())
	if err != nil {
		return usageErr("%v", err)
	}
	q.Set("since", since)
	q.Set("mark_seen", "false") // a look, not a read: an agent's check_messages still shows them
	for k, v := range map[string]string{"mesh": c.Mesh, "topic": c.Topic, "thread": c.Thread,
		"importance": c.Importance} {
		if v != "" {
			q.Set(k, v)
		}
	}
	needs := []string{"inbox"}
	if c.Unacked {
		q.Set("unacked", "true")
	}
	if c.Thread != "" || c.Importance != "" || c.Unacked {
		needs = append(needs, "mail")
	}
	if c.Follow {
		needs = append(needs, "events")
	}
	client, d, err := connectDaemon("claudemesh inbox", needs...)
	if err != nil {
		return err
	}
	c.daemon = d
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.From != "" {
		if c.From, err = c.sender(ctx, client); err != nil {
			return err
		}
		q.Set("from", c.From)
	}
	var stream *ipc.EventStream
	if c.Follow { // opened first: nothing that arrives while the window is listed is missed
		if stream, err = client.Events(ctx, c.Mesh, 0); err != nil {
			return err
		}
		defer func() { stream.Close() }()
	}
	shown, err := c.window(ctx, client, q)
	if err != nil || stream == nil {
		return err
	}
	c.followTopics(ctx, client)
	var last int64
	for {
		ev, err := stream.Next()
		if ctx.Err() != nil {
			return nil // interrupted
		}
		if errors.Is(err, io.EOF) {
			// The daemon closes a stream that falls too far behind; resume
			// after the last event seen. A daemon that stopped ends it here.
			resumed, err := client.Events(ctx, c.Mesh, last)
			if err != nil {
				return fmt.Errorf("the event stream ended and could not be resumed: %w", err)
			}
			stream.Close()
			stream = resumed
			continue
		}
		if err != nil {
			return err
		}
		last = ev.ID
		it, ok := messageEvent(ev)
		if ok && it.TopicName == "" {
			it.TopicName = c.topics[string(it.Topic)]
		}
		if !ok || shown[it.ID] || !c.matches(it) {
			continue
		}
		shown[it.ID] = true
		c.print(it)
	}
}

// messageEvent reads the inbox item a "message" event carries. Upstream's
// says when the message was made (created_at) and when the event was (ts),
// not when it was received: the first of them stands in for received_at.
func messageEvent(ev ipc.Event) (*messages.InboxItem, bool) {
	var it struct {
		messages.InboxItem
		CreatedAt string `json:"created_at"`
		TS        string `json:"ts"`
	}
	if ev.Name != "message" || json.Unmarshal(ev.Data, &it) != nil {
		return nil, false
	}
	it.ReceivedAt = cmp.Or(it.ReceivedAt, it.CreatedAt, it.TS)
	return &it.InboxItem, true
}

// window prints the messages of the --since window, page after page, up to
// --limit, and returns their ids.
func (c *daemonInboxCmd) window(ctx context.Context, client *ipc.Client, q url.Values) (map[string]bool, error) {
	shown := map[string]bool{}
	for left := c.Limit; left > 0; {
		q.Set("limit", strconv.Itoa(min(left, ipcserver.MaxInboxLimit)))
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		page, err := client.Inbox(rctx, q)
		cancel()
		if err != nil {
			return nil, err
		}
		if c.daemon.Kind == ipc.DaemonUpstream { // newest first, and no cursor: one page
			slices.Reverse(page.Items)
		}
		for i := range page.Items {
			shown[page.Items[i].ID] = true
			c.print(&page.Items[i])
		}
		left -= len(page.Items)
		if page.Next == "" {
			break
		}
		q.Set("after", page.Next)
	}
	if len(shown) == 0 && !c.JSON && !c.Follow {
		fmt.Printf("no messages since %s\n", stamp(q.Get("since")))
	}
	return shown, nil
}

// followTopics learns the names of the mesh's topics (--mesh, else the
// daemon's only mesh), by id: a live message names its topic by id, which
// --follow prints by name and --topic matches by name. With several meshes
// and no --mesh the list is not asked, and a live message shows its
// topic's id (and --topic matches it by id).
func (c *daemonInboxCmd) followTopics(ctx context.Context, client *ipc.Client) {
	list, err := client.Topics(ctx, c.Mesh)
	if err != nil {
		return
	}
	c.topics = list.Names()
}

// sender is --from as a pubkey: a 64-hex key as it is, else a display
// name or a unique pubkey prefix resolved through the daemon's peer list,
// as claudemesh send resolves its recipient. One that names no peer, or
// several, is a usage error saying which peers there are.
func (c *daemonInboxCmd) sender(ctx context.Context, client *ipc.Client) (string, error) {
	if len(c.From) == 64 && messages.IsHex(c.From) {
		return strings.ToLower(c.From), nil
	}
	if !c.daemon.Offers("peers") {
		return "", usageErr("--from: the running %s lists no peers to resolve %q with; give the 64-hex pubkey", c.daemon, c.From)
	}
	peers, err := meshPeers(ctx, client, c.Mesh)
	if err != nil {
		return "", fmt.Errorf("cannot resolve --from %q through the daemon's peer list: %w", c.From, err)
	}
	key, err := messages.ResolvePeer(c.From, c.Mesh, peers)
	if err != nil {
		return "", usageErr("--from: %v", err)
	}
	return key, nil
}

// matches applies --mesh, --topic, --from and the mail filters to a live
// message (--mesh is
// also the stream's own filter on our daemon; upstream's stream has none).
func (c *daemonInboxCmd) matches(it *messages.InboxItem) bool {
	importance := cmp.Or(it.Importance, messages.ImportanceNormal)
	topic := c.Topic == "" || string(it.Topic) == c.Topic || it.TopicName == c.Topic
	return (c.Mesh == "" || it.Mesh == c.Mesh) && topic &&
		(c.From == "" || strings.EqualFold(it.SenderPubkey, c.From)) &&
		(c.Thread == "" || it.ThreadID == c.Thread || it.ClientMessageID == c.Thread) &&
		(c.Importance == "" || importance == c.Importance) && (!c.Unacked || it.AckRequired && it.AckedAt == nil)
}

// print writes one message: as its JSON, exact, or as inboxEntry.
func (c *daemonInboxCmd) print(it *messages.InboxItem) {
	if c.JSON {
		_ = printWithDaemon(it, c.daemon)
		return
	}
	fmt.Println(inboxEntry(it))
}

// inboxLine is one message on one line — when, mesh, destination, sender:
// body — with what came from the mesh (names, topic, body) printable.
func inboxLine(it *messages.InboxItem) string {
	body := "(could not be decrypted)"
	if it.Body != nil {
		body = printable(*it.Body)
	}
	from := it.SenderName
	if from == "" {
		from = short(it.SenderPubkey, 12)
	}
	return fmt.Sprintf("%s  %s  %s  %s: %s", stamp(it.ReceivedAt), printable(it.Mesh), printable(inboxDestination(it)),
		printable(from), body)
}

// inboxDestination is where a message was sent as `send` takes it: dm,
// #topic, @group or * (a broadcast); "-" for an item that says neither its
// kind nor its topic (upstream's DMs and untopical broadcasts look alike).
func inboxDestination(it *messages.InboxItem) string {
	topic := string(it.Topic)
	switch {
	case it.Kind == messages.KindDM:
		return "dm"
	case it.Kind == "" && topic == "":
		return "-"
	case topic == "*", strings.HasPrefix(topic, "@"), strings.HasPrefix(topic, "#"):
		return topic
	}
	return "#" + cmp.Or(it.TopicName, topic)
}

// sinceParam turns --since (a duration ago or an RFC 3339 time) into the
// route's since parameter.
func sinceParam(s string, now time.Time) (string, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return "", fmt.Errorf("--since %s: a duration ago must not be negative", s)
		}
		return now.Add(-d).UTC().Format(time.RFC3339Nano), nil
	}
	if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
		return "", fmt.Errorf("--since %q: want a duration ago (24h) or an RFC 3339 time (2026-01-02T15:04:05Z)", s)
	}
	return s, nil
}
