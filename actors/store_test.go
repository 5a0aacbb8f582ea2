package actors

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// probe stands in for a mesh's dispatcher: it registers with the store and
// hands what the store sends it to the test.
type probe struct {
	store *actor.PID
	ready *messages.DispatchReady
	got   chan any
}

// probed is the next message the store sent a probe.
func probed(t *testing.T, got <-chan any) any {
	t.Helper()
	select {
	case m := <-got:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("the store sent the dispatcher nothing within 5 s")
		return nil
	}
}

// outcomeOf asks the probe to report an outcome to the store, as the
// dispatcher does (the store answers the probe).
type outcomeOf struct{ out *messages.SendOutcome }

func (p *probe) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Request(p.store, p.ready)
	case *outcomeOf:
		ctx.Request(p.store, m.out)
	case *messages.ClaimedRows, *messages.OutcomeApplied:
		p.got <- m
	}
}

// TestStoreClaimsForDispatcher drives the store's side of dispatching: a
// ready dispatcher gets the rows already waiting, a later accept's row is
// handed over claimed in its own transaction, a send outcome is held for a
// batch to join yet applied on its own, and outcomes still held when the
// store stops are applied before it goes.
func TestStoreClaimsForDispatcher(t *testing.T) {
	tree, _, outbox := openTree(t, nil)
	root := tree.System.Root
	accept := func(id string) {
		t.Helper()
		res, err := root.RequestFuture(tree.Store, &messages.AcceptSend{Mesh: "m", ClientMessageID: id, RowID: "row-" + id,
			Fingerprint: messages.Fingerprint{1}, Payload: []byte(`{"type":"send","targetSpec":"#t"}`), Now: time.Now().UnixMilli()},
			5*time.Second).Result()
		if r, ok := res.(*messages.AcceptResult); err != nil || !ok || !r.Inserted {
			t.Fatalf("accept %s: %+v, %v", id, res, err)
		}
	}
	rows := func(status string) map[string]messages.OutboxItem {
		t.Helper()
		return outboxRows(t, tree, status)
	}
	got := make(chan any, 16)
	next := func() any { t.Helper(); return probed(t, got) }
	claimedIDs := func() []string {
		t.Helper()
		c, ok := next().(*messages.ClaimedRows)
		if !ok || c.Gen != 7 {
			t.Fatalf("want ClaimedRows of gen 7, got %+v", c)
		}
		var ids []string
		for _, r := range c.Rows {
			if r.Attempts != 1 {
				t.Errorf("row %s handed over at attempt %d, want 1", r.ClientMessageID, r.Attempts)
			}
			ids = append(ids, r.ClientMessageID)
		}
		return ids
	}

	accept("a") // before any dispatcher: stays pending
	if it := rows("pending")["a"]; it.Attempts != 0 {
		t.Fatalf("row a before the dispatcher: %+v", it)
	}
	p := root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &probe{store: tree.Store, got: got,
			ready: &messages.DispatchReady{Mesh: "m", Gen: 7, Window: 2, Now: time.Now().UnixMilli()}}
	}))
	if ids := claimedIDs(); len(ids) != 1 || ids[0] != "a" {
		t.Fatalf("first claim = %v, want [a]", ids)
	}
	if m, ok := next().(*messages.OutcomeApplied); !ok || m.Err != nil {
		t.Fatalf("DispatchReady answered %+v", m)
	}
	accept("b") // credit left, nothing older due: claimed in the accept's transaction
	if ids := claimedIDs(); len(ids) != 1 || ids[0] != "b" {
		t.Fatalf("claim after accept = %v, want [b]", ids)
	}
	if it, ok := rows("inflight")["b"]; !ok || it.Attempts != 1 {
		t.Fatalf("row b after its accept: %+v (present %v), want inflight at attempt 1", it, ok)
	}
	accept("c") // the window of 2 is full: c waits
	if it, ok := rows("pending")["c"]; !ok {
		t.Fatalf("row c should wait for credit, got %+v", it)
	}

	// An outcome alone commits within OutcomeDelay and returns credit, so c
	// is claimed in the same transaction.
	root.Send(p, &outcomeOf{&messages.SendOutcome{Mesh: "m", Gen: 7, RowID: "row-a", Outcome: messages.OutcomeDone,
		BrokerMessageID: "bm-a", Now: time.Now().UnixMilli()}})
	if ids := claimedIDs(); len(ids) != 1 || ids[0] != "c" {
		t.Fatalf("claim after the outcome = %v, want [c]", ids)
	}
	if m, ok := next().(*messages.OutcomeApplied); !ok || m.Err != nil || m.StateChanged {
		t.Fatalf("outcome of a answered %+v", m)
	}
	if it := rows("done")["a"]; it.BrokerMessageID == nil || *it.BrokerMessageID != "bm-a" {
		t.Fatalf("row a after its outcome: %+v", it)
	}

	// Outcomes held when the store stops are applied before it goes (an
	// outcome of an older link too: only its credit is not returned).
	root.Send(p, &outcomeOf{&messages.SendOutcome{Mesh: "m", Gen: 7, RowID: "row-b", Outcome: messages.OutcomeDone,
		BrokerMessageID: "bm-b", Now: time.Now().UnixMilli()}})
	root.Send(p, &outcomeOf{&messages.SendOutcome{Mesh: "m", Gen: 6, RowID: "row-c", Outcome: messages.OutcomeDone,
		BrokerMessageID: "bm-c", Now: time.Now().UnixMilli()}})
	if err := root.PoisonFuture(p).Wait(); err != nil { // the probe's sends are in the store's mailbox
		t.Fatal(err)
	}
	if err := root.PoisonFuture(tree.Store).Wait(); err != nil {
		t.Fatal(err)
	}
	b, err := outbox.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var page *messages.OutboxPage
	err = b.Do(func(tx *persistence.Tx) (err error) {
		page, err = outbox.List(tx, &messages.ListOutbox{Limit: 100})
		return err
	})
	b.Rollback()
	if err != nil {
		t.Fatal(err)
	}
	done := map[string]bool{}
	for _, it := range page.Items {
		done[it.ClientMessageID] = it.Status == messages.StatusDone
	}
	if !done["b"] || !done["c"] {
		t.Fatalf("held outcomes lost at stop: done = %v", done)
	}
}
