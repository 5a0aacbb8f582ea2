package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
	"github.com/claudemesh/claudemesh-go/transport/ipcserver"
)

type daemonAuditCmd struct {
	Verify auditVerifyCmd `cmd:"" help:"Check the whole audit chain, each entry's hash and its link to the one before, and every outbox row's status against it; name what is wrong and exit 8 if anything is."`
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
	chain := &auditChain{statuses: map[string][]string{}}
	if err := chain.read(client); err != nil {
		return err
	}
	if chain.n == 0 {
		fmt.Println("audit chain ok: 0 entries")
		return nil
	}
	// The outbox's rows against the chain: read after it, then the
	// chain's entries since, so that a row that moved meanwhile finds its
	// entry among them.
	rows, err := outboxRows(client)
	if err != nil {
		return err
	}
	seen := chain.mark()
	if err := chain.read(client); err != nil {
		return err
	}
	if off := chain.unaudited(rows, seen); len(off) > 0 {
		return &exitError{code: 8, err: fmt.Errorf("the audit chain links, but the outbox has rows whose status it does not record "+
			"(changed outside the daemon, while its audit triggers were gone):\n  %s\nkeep a copy of outbox.db and its -wal file "+
			"before anything else writes to them", strings.Join(off, "\n  "))}
	}
	fmt.Printf("audit chain ok: %d entries (seq %d..%d)\n", chain.n, chain.first, chain.last.Seq)
	fmt.Printf("every outbox row's status is in it (%d rows)\n", len(rows))
	if chain.first > 1 {
		fmt.Printf("verified from seq %d, the oldest entry retention kept; its prev_hash is taken on trust\n", chain.first)
	}
	fmt.Printf("newest hash %s (note it to detect a log cut short later)\n", chain.last.Hash)
	return nil
}

// auditChain is the audit log as verify reads it: checked link by link,
// and each outbox row's statuses in order (by row id).
type auditChain struct {
	first, after int64
	n            int
	last         *messages.AuditEntry
	statuses     map[string][]string
}

// read checks and takes the entries after those already read.
func (a *auditChain) read(client *ipc.Client) error {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		page, err := client.Audit(ctx, a.after, ipcserver.MaxAuditLimit)
		cancel()
		if err != nil {
			return err
		}
		if a.first == 0 && len(page.Entries) > 0 {
			a.first = page.Entries[0].Seq
		}
		if a.last, err = messages.VerifyAudit(a.last, page.Entries); err != nil {
			return &exitError{code: 8, err: fmt.Errorf("%w\noutbox.db's audit log was changed outside the daemon: "+
				"keep a copy of outbox.db and its -wal file before anything else writes to them", err)}
		}
		for _, e := range page.Entries {
			a.note(e)
		}
		a.n += len(page.Entries)
		if a.last != nil {
			a.after = a.last.Seq
		}
		if page.NextAfter == 0 {
			return nil
		}
	}
}

// note takes the status an outbox entry gives its row: an accept's, or a
// transition's new one.
func (a *auditChain) note(e messages.AuditEntry) {
	if !strings.HasPrefix(e.Kind, "outbox.") {
		return
	}
	var d struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		To     string `json:"to"`
	}
	if json.Unmarshal([]byte(e.Detail), &d) != nil || d.ID == "" {
		return
	}
	switch st := cmp.Or(d.To, d.Status); e.Kind {
	case "outbox.accepted", "outbox." + d.To:
		a.statuses[d.ID] = append(a.statuses[d.ID], st)
	}
}

// mark is how many statuses each row has in what has been read.
func (a *auditChain) mark() map[string]int {
	out := make(map[string]int, len(a.statuses))
	for id, sts := range a.statuses {
		out[id] = len(sts)
	}
	return out
}

// unaudited are the rows whose status is neither their newest in the chain
// as it was when the rows were read (seen) nor one the entries since gave
// them; a row with no entry counts only when the chain starts at seq 1
// (retention prunes old rows' entries).
func (a *auditChain) unaudited(rows []messages.OutboxItem, seen map[string]int) []string {
	var off []string
	for _, r := range rows {
		sts, ok := a.statuses[r.ID]
		n := seen[r.ID]
		switch {
		case !ok && a.first == 1:
			off = append(off, fmt.Sprintf("%s (%s): %s, with no entry", r.ID, printable(r.ClientMessageID), r.Status))
		case ok && !(n > 0 && sts[n-1] == r.Status) && !slices.Contains(sts[n:], r.Status):
			off = append(off, fmt.Sprintf("%s (%s): %s, its last entry says %s", r.ID, printable(r.ClientMessageID), r.Status, sts[len(sts)-1]))
		}
	}
	return off
}

// outboxRows pages through every outbox row, newest first.
func outboxRows(client *ipc.Client) ([]messages.OutboxItem, error) {
	var rows []messages.OutboxItem
	before := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		page, err := client.ListOutbox(ctx, "", ipcserver.MaxOutboxLimit, before)
		cancel()
		if err != nil {
			return nil, err
		}
		rows = append(rows, page.Items...)
		if page.Next == "" {
			return rows, nil
		}
		before = page.Next
	}
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
		fmt.Fprintln(tw, row(fmt.Sprint(e.Seq), stamp(e.At), e.Kind, e.Subject, e.Detail))
	}
	tw.Flush()
	if page.NextAfter != 0 {
		fmt.Printf("more entries: claudemesh daemon audit list --after %d\n", page.NextAfter)
	}
	return nil
}
