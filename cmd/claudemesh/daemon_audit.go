package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
	"github.com/claudemesh/claudemesh-go/transport/ipcserver"
)

type daemonAuditCmd struct {
	Verify auditVerifyCmd `cmd:"" help:"Check the whole audit chain, each entry's hash and its link to the one before; name the first broken link and exit 8 if there is one."`
	List   auditListCmd   `cmd:"" help:"List audit entries, oldest first."`
}

// auditClient connects to the daemon for its audit log. The log is the
// daemon's, every sender's, so the client asks without the session token
// it would present inside an agent session.
func auditClient(what string) (*ipc.Client, *ipc.Daemon, error) {
	client, d, err := connectDaemon(what, "audit")
	if err != nil {
		return nil, nil, err
	}
	return client.AsSession(""), d, nil
}

type auditVerifyCmd struct{}

func (c *auditVerifyCmd) Run() error {
	client, _, err := auditClient("claudemesh daemon audit verify")
	if err != nil {
		return err
	}
	var (
		first, after int64
		n            int
		last         *messages.AuditEntry
	)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		page, err := client.Audit(ctx, after, ipcserver.MaxAuditLimit)
		cancel()
		if err != nil {
			return err
		}
		if first == 0 && len(page.Entries) > 0 {
			first = page.Entries[0].Seq
		}
		if last, err = messages.VerifyAudit(last, page.Entries); err != nil {
			return &exitError{code: 8, err: fmt.Errorf("%w\noutbox.db's audit log was changed outside the daemon: "+
				"keep a copy of outbox.db and its -wal file before anything else writes to them", err)}
		}
		n += len(page.Entries)
		if page.NextAfter == 0 {
			break
		}
		after = page.NextAfter
	}
	if n == 0 {
		fmt.Println("audit chain ok: 0 entries")
		return nil
	}
	fmt.Printf("audit chain ok: %d entries (seq %d..%d)\n", n, first, last.Seq)
	if first > 1 {
		fmt.Printf("verified from seq %d, the oldest entry retention kept; its prev_hash is taken on trust\n", first)
	}
	fmt.Printf("newest hash %s (note it to detect a log cut short later)\n", last.Hash)
	return nil
}

type auditListCmd struct {
	After int64 `placeholder:"SEQ" help:"Start after this seq (the cursor a previous page printed)."`
	Limit int   `default:"100" help:"Entries per page (1-1000)."`
	JSON  bool  `name:"json" help:"Print the page as one JSON object; detail is the JSON text that was hashed, as a string."`
}

func (c *auditListCmd) Run() error {
	if c.Limit < 1 || c.Limit > ipcserver.MaxAuditLimit || c.After < 0 {
		return usageErr("--limit must be from 1 to %d and --after a seq, 0 or more", ipcserver.MaxAuditLimit)
	}
	client, d, err := auditClient("claudemesh daemon audit list")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	page, err := client.Audit(ctx, c.After, c.Limit)
	if err != nil {
		return err
	}
	if c.JSON {
		return printWithDaemon(page, d)
	}
	if len(page.Entries) == 0 {
		fmt.Println("no audit entries")
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tAT\tKIND\tSUBJECT\tDETAIL")
	for _, e := range page.Entries {
		fmt.Fprintln(tw, row(fmt.Sprint(e.Seq), e.At, e.Kind, e.Subject, e.Detail))
	}
	tw.Flush()
	if page.NextAfter != 0 {
		fmt.Printf("more entries: claudemesh daemon audit list --after %d\n", page.NextAfter)
	}
	return nil
}
