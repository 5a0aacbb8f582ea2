package actors

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestStoreHandlesEveryMessage walks the command table: every command
// type has a case here, the store answers it with its reply type (a
// command with no reply is run, and the store answers the next request),
// and a failed command's reply carries the error.
func TestStoreHandlesEveryMessage(t *testing.T) {
	system, store, _, _ := spawnStore(t, StoreOptions{Hooks: openHooksDB(t)})
	now := time.Now().UnixMilli()
	body := "hello"
	cases := []struct {
		msg  any
		want any // the reply type; nil: the command answers nobody
	}{
		{&messages.AcceptSend{Mesh: "m", ClientMessageID: "a", RowID: "01J0000000000000000000000A", Payload: []byte(`{}`),
			Now: now}, &messages.AcceptResult{}},
		{&messages.RequeueOutbox{ID: "missing", NewRowID: "r", NewClientMessageID: "n", Now: now}, &messages.RequeueResult{}},
		{&messages.DropOutbox{ID: "missing", Now: now}, &messages.DropResult{}},
		{&messages.ListOutbox{Limit: 10}, &messages.OutboxPage{}},
		{&messages.ListAudit{Limit: 10}, &messages.AuditPage{}},
		{&messages.RecordLock{Route: "m/s", Mesh: "m", Holder: "p", Key: "k", Fence: 1, TTL: time.Second,
			Kind: messages.LockKindAcquired, Keep: true, Now: now}, &messages.LockRecorded{}},
		{&messages.HeldLocks{Route: "m/s"}, &messages.HeldLockList{}},
		{&messages.RecordReservation{Route: "m/s", Mesh: "m", Holder: "p", Repo: "git:r", Fence: 1, Patterns: []string{"src/**"},
			TTL: time.Second, Kind: messages.LockKindAcquired, Keep: true}, &messages.ReservationRecorded{}},
		{&messages.HeldReservations{Route: "m/s"}, &messages.HeldReservationList{}},
		{&messages.AbandonHeldLocks{Route: "m/s"}, &messages.LockRecorded{}},
		{&messages.KeepNames{Route: "m", Kind: messages.KeptTopicNames, Topics: map[string]string{"builds": "t1"}, Now: now}, nil},
		{&messages.ReadKeptNames{Route: "m"}, &messages.KeptNames{}},
		{&messages.ForgetNames{Route: "m"}, nil},
		{&messages.OutboxStats{}, &messages.OutboxCounts{}},
		{&messages.DispatchReady{Mesh: "m", Gen: 1, Window: 1, Now: now}, &messages.OutcomeApplied{}},
		{&messages.DispatchWake{Mesh: "m"}, nil},
		{&messages.SendOutcome{Mesh: "m", Gen: 1, RowID: "01J0000000000000000000000A", Outcome: messages.OutcomeDone,
			Now: now}, &messages.OutcomeApplied{}},
		{&messages.ReleaseMesh{Mesh: "m", Now: now}, &messages.OutcomeApplied{}},
		{&messages.StoreInbound{Item: messages.InboxItem{ID: "i1", ClientMessageID: "c1", Mesh: "m", Kind: "dm",
			SenderPubkey: "p", SenderName: "n", Body: &body, ReceivedAtMs: now}}, &messages.InboundStored{}},
		{&messages.AppendEvent{Name: "broker_status", Data: []byte(`{}`)}, &messages.EventAppended{}},
		{&messages.ListInbox{Limit: 10, UnreadOnly: true, MarkSeen: true, Now: now}, &messages.InboxPage{}},
		{&messages.MarkInboxSeen{IDs: []string{"i1"}, Mesh: "m", Now: now}, &messages.InboxChanged{}},
		{&messages.DeleteInbox{ID: "i1"}, &messages.InboxChanged{}},
		{&messages.EventsSince{After: 0, Limit: 10}, &messages.EventsPage{}},
		{&messages.PruneInbox{Before: 0, EventsKeep: 100, Limit: 10}, &messages.Pruned{}},
		{&messages.PruneOutbox{Before: 0, Limit: 10}, &messages.Pruned{}},
		{&messages.ClaimHooks{Now: now, Cutoff: now - 30_000, Limit: 25, Recover: true}, &messages.HooksClaimed{}},
		{&messages.FinishHooks{Now: now, Outcomes: []messages.HookOutcome{{ID: 1, Kind: messages.HookDelivered}}},
			&messages.HooksFinished{}},
		{&messages.HookStats{Now: now}, &messages.HookCounts{}},
		{&messages.PruneHooks{Before: now, Limit: 10}, &messages.HooksPruned{}},
		{&messages.RecordReceipt{Mesh: "m", ClientMessageID: "a", Kind: messages.ReceiptAck, Peer: "p", PeerName: "n", At: now},
			&messages.ReceiptRecorded{}},
		{&messages.ThreadOfOutbox{Mesh: "m", ClientMessageID: "a"}, &messages.ThreadFound{}},
		{&messages.GetInboxRow{ID: "i1"}, &messages.InboxRowFound{}},
		{&messages.MarkInboxAcked{ID: "i1", Now: now}, &messages.InboxRowFound{}},
		{&messages.ThreadOfInbox{Mesh: "m", ClientMessageID: "c1"}, &messages.ThreadFound{}},
		{&messages.SearchInbox{Query: "hello", Limit: 10}, &messages.InboxPage{}},
		{&messages.SetContactPolicy{Mesh: "m", Policy: messages.PolicyAuto, Now: now}, &messages.Contacts{}},
		{&messages.ListContacts{Mesh: "m"}, &messages.Contacts{}},
		{&messages.ListContactRequests{Mesh: "m", Now: now}, &messages.ContactRequests{}},
		{&messages.NoteContact{Mesh: "m", Peer: "p", Name: "n", Now: now}, nil},
		{&messages.DecideContact{Mesh: "m", Peer: "p", Accept: true, Now: now}, &messages.ContactDecision{}},
		{&messages.ListExpiredRequests{Mesh: "m", Now: now, Limit: 10}, &messages.ExpiredRequests{}},
		{&messages.DropExpiredRequests{Mesh: "m", IDs: []string{"i1"}, Now: now}, &messages.RequestsDropped{}},
	}
	// One actor asks every question, as a dispatcher would: DispatchReady
	// registers it, and the claims the store then sends it are passed over.
	replies := make(chan any, 64)
	asker := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started, *actor.Stopping, *actor.Stopped, *messages.ClaimedRows:
		default:
			replies <- m
		}
	}))
	covered := map[reflect.Type]bool{}
	for _, c := range cases {
		typ := reflect.TypeOf(c.msg)
		covered[typ] = true
		cmd := commands[typ]
		if cmd == nil {
			t.Errorf("%v has a case but no entry in the command table", typ)
			continue
		}
		if c.want == nil {
			system.Root.Send(store, c.msg)
			askStore(t, system, store, &messages.OutboxStats{}) // the store went past it
			if cmd.fail != nil {
				t.Errorf("%v answers nobody, yet its entry has a failure reply", typ)
			}
			continue
		}
		system.Root.RequestWithCustomSender(store, c.msg, asker)
		var res any
		select {
		case res = <-replies:
		case <-time.After(5 * time.Second):
			t.Fatalf("%v: no answer within 5 s", typ)
		}
		if got, want := reflect.TypeOf(res), reflect.TypeOf(c.want); got != want {
			t.Errorf("%v answered %v, want %v", typ, got, want)
		}
		boom := errors.New("boom")
		f, ok := cmd.fail(c.msg, boom).(interface{ Failure() error })
		if !ok || reflect.TypeOf(f) != reflect.TypeOf(c.want) || !errors.Is(f.Failure(), boom) {
			t.Errorf("%v: a failure's reply is %#v, want a %T carrying the error", typ, f, c.want)
		}
	}
	for typ := range commands {
		if !covered[typ] {
			t.Errorf("store command %v has no case in TestStoreHandlesEveryMessage", typ)
		}
	}
	if len(cases) != len(commands) {
		t.Errorf("%d cases for %d commands", len(cases), len(commands))
	}
}
