package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/claudemesh/claudemesh-go/cmd/internal/mcpserver"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

type outboxListCmd struct {
	Pending  bool   `xor:"status" help:"Only rows waiting to be sent."`
	Inflight bool   `xor:"status" help:"Only rows being sent now."`
	Done     bool   `xor:"status" help:"Only rows the broker accepted."`
	Failed   bool   `xor:"status" help:"Only dead rows (a permanent rejection or too old); recover them with requeue."`
	Aborted  bool   `xor:"status" help:"Only rows retired by requeue or drop."`
	Limit    int    `default:"50" help:"Rows per page (1-500)."`
	Before   string `placeholder:"ROW_ID" help:"Start after this row id (the cursor a previous page printed)."`
	JSON     bool   `name:"json" help:"Print the page as one JSON object."`
}

func (c *outboxListCmd) status() string {
	switch {
	case c.Pending:
		return messages.StatusPending
	case c.Inflight:
		return messages.StatusInflight
	case c.Done:
		return messages.StatusDone
	case c.Failed:
		return messages.StatusDead
	case c.Aborted:
		return messages.StatusAborted
	}
	return ""
}

func (c *outboxListCmd) Run() error {
	if c.Limit < 1 || c.Limit > 500 {
		return usageErr("--limit must be 1-500, not %d", c.Limit)
	}
	client, d, err := connectDaemon("claudemesh daemon outbox list", "outbox")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	page, err := client.ListOutbox(ctx, c.status(), c.Limit, c.Before)
	if err != nil {
		return err
	}
	if c.JSON {
		return printWithDaemon(page, d)
	}
	if len(page.Items) == 0 {
		fmt.Println("no outbox rows")
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCLIENT_MESSAGE_ID\tMESH\tSTATUS\tATTEMPTS\tTO\tENQUEUED\tDETAIL")
	for _, it := range page.Items {
		fmt.Fprintln(tw, row(it.ID, it.ClientMessageID, it.Mesh, it.Status, strconv.Itoa(it.Attempts), short(it.To, 16),
			stamp(it.EnqueuedAt), detail(&it)))
	}
	tw.Flush()
	if page.Next != "" {
		fmt.Printf("more rows: claudemesh daemon outbox list%s --before %s\n", c.pageFlags(), printable(page.Next))
	}
	return nil
}

// pageFlags are the flags of this listing that the next page's command
// keeps: its filter and its page size.
func (c *outboxListCmd) pageFlags() string {
	f := " --limit " + strconv.Itoa(c.Limit)
	for flag, set := range map[string]bool{" --pending": c.Pending, " --inflight": c.Inflight, " --done": c.Done,
		" --failed": c.Failed, " --aborted": c.Aborted} { // one at most: they are exclusive
		if set {
			f = flag + f
		}
	}
	return f
}

// detail is the one thing worth knowing about a row beyond its status:
// why it failed, what replaced it, what recipients' contact policies did
// with it, else the broker's id for it.
func detail(it *messages.OutboxItem) string {
	switch {
	case it.LastError != nil:
		return *it.LastError
	case it.SupersededBy != nil:
		return "superseded by " + *it.SupersededBy
	case len(it.Receipts) > 0:
		return strings.TrimPrefix(receiptNotes(it.Receipts), "  ")
	case it.BrokerMessageID != nil:
		return "broker " + *it.BrokerMessageID
	}
	return ""
}

// receiptNotes says what recipients' contact policies did with a sent
// message, each receipt after two spaces ("" for none): the sender's
// answer where a recipient holds or refuses it.
func receiptNotes(rs []messages.Receipt) string {
	var b strings.Builder
	for i := range rs {
		b.WriteString("  " + printable(rs[i].Describe()))
	}
	return b.String()
}

// short is s cut to its first n bytes (at a character's start) and "…".
func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// daemonClient returns a client for the running daemon's socket; inside
// an agent session (claudemesh launch) it calls as that session, so that
// peers, inbox and send are the session's own.
func daemonClient() (*ipc.Client, error) {
	paths, err := config.ResolvePaths()
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	tok, err := mcpserver.SessionToken()
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return ipc.NewClient(paths.Socket()).AsSession(tok), nil
}
