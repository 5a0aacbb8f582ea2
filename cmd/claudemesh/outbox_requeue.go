package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

type outboxRequeueCmd struct {
	ID           string `arg:"" name:"id" help:"Outbox row id (the ID column of outbox list)."`
	NewClientID  string `name:"new-client-id" xor:"newid" placeholder:"ID" help:"client_message_id for the new row."`
	Auto         bool   `xor:"newid" help:"Mint a fresh client_message_id (the default)."`
	PatchPayload string `type:"existingfile" placeholder:"FILE" help:"JSON file in the /v1/send request shape to send instead; validated and fingerprinted like a new send."`
	JSON         bool   `name:"json" help:"Print the result as one JSON object."`
}

func (c *outboxRequeueCmd) Run() error {
	req := &messages.RequeueRequest{ID: c.ID, NewClientMessageID: c.NewClientID}
	if c.PatchPayload != "" {
		b, err := os.ReadFile(c.PatchPayload)
		if err != nil {
			return err
		}
		req.Patch = new(messages.SendRequest)
		if err := messages.DecodeJSON(b, req.Patch); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("%s: %w", c.PatchPayload, err)}
		}
	}
	client, d, err := connectDaemon("claudemesh daemon outbox requeue", "outbox")
	if err != nil {
		return err
	}
	if req.Patch != nil && d.Kind != ipc.DaemonOurs {
		return usageErr("--patch-payload is this claudemesh's own extension; the running %s would ignore it and requeue the row unchanged", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := client.Requeue(ctx, req)
	if err != nil {
		return err
	}
	if c.JSON {
		return printWithDaemon(res, d)
	}
	fmt.Printf("row %s aborted; new row %s queued with client_message_id %s\n",
		res.AbortedRowID, res.NewRowID, res.NewClientMessageID)
	return nil
}

type outboxDropCmd struct {
	ID   string `arg:"" name:"id" help:"Outbox row id (the ID column of outbox list)."`
	JSON bool   `name:"json" help:"Print the result as one JSON object."`
}

// Run gives up on a dead or pending row: it is never sent, and its
// client_message_id stays taken (a retry of it is refused).
func (c *outboxDropCmd) Run() error {
	client, d, err := connectDaemon("claudemesh daemon outbox drop", "outbox")
	if err != nil {
		return err
	}
	if d.Kind != ipc.DaemonOurs {
		return fmt.Errorf("outbox drop is this claudemesh's own route; the running %s has none (requeue is what it offers)", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := client.Drop(ctx, c.ID)
	if err != nil {
		return err
	}
	if c.JSON {
		return printWithDaemon(res, d)
	}
	fmt.Printf("row %s dropped (aborted, not sent); client_message_id %s stays taken\n", res.AbortedRowID, res.ClientMessageID)
	return nil
}
