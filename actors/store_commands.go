package actors

import (
	"fmt"
	"net/http"
	"reflect"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// commands is the store's command table: one entry per message type it
// runs against a database, saying which database, whether the reply waits
// for that database's WAL fsync, whether the command needs a savepoint,
// how it runs, and what event its reply publishes. Adding a command is one
// entry here (plus its SQL in persistence/); TestStoreHandlesEveryMessage
// walks the table, so a command without a test case fails it.
//
// Every reply type carries the store's error in a field Err (and reports
// it through Failure), so the reply of a failed command is built from the
// type alone.
var commands = commandTable(
	// The accept path and operator recovery (outbox.db). The caller is told
	// its message is stored, or given up: the reply waits for the fsync.
	entry(spec[messages.AcceptSend, messages.AcceptResult]{db: outboxDB, durable: true, run: (*Store).accept}),
	entry(spec[messages.RequeueOutbox, messages.RequeueResult]{db: outboxDB, durable: true, savepoint: true,
		run: (*Store).requeue}),
	entry(spec[messages.DropOutbox, messages.DropResult]{db: outboxDB, durable: true,
		run: func(s *Store, tx *persistence.Tx, m *messages.DropOutbox, _ *actor.PID) (*messages.DropResult, error) {
			return s.outbox.Drop(tx, m)
		}}),
	entry(spec[messages.ListOutbox, messages.OutboxPage]{db: outboxDB,
		run: func(s *Store, tx *persistence.Tx, m *messages.ListOutbox, _ *actor.PID) (*messages.OutboxPage, error) {
			return s.outbox.List(tx, m)
		}}),
	entry(spec[messages.ListAudit, messages.AuditPage]{db: outboxDB,
		run: func(s *Store, tx *persistence.Tx, m *messages.ListAudit, _ *actor.PID) (*messages.AuditPage, error) {
			return s.outbox.ListAudit(tx, m)
		}}),
	// Lock and reservation transitions and a session's held locks and
	// grants (outbox.db, beside the audit log they append to). The caller of an acquire or a release is
	// answered once its transition is committed, not fsynced: one lost in a
	// power cut loses its entry, and a kept lock its renewal after the
	// restart (it runs out, which the broker's fence tokens make safe).
	entry(spec[messages.RecordLock, messages.LockRecorded]{db: outboxDB,
		run: func(s *Store, tx *persistence.Tx, m *messages.RecordLock, _ *actor.PID) (*messages.LockRecorded, error) {
			return &messages.LockRecorded{}, s.outbox.RecordLock(tx, m)
		},
		echo: func(m *messages.RecordLock, r *messages.LockRecorded) { r.ID = m.ID }}),
	entry(spec[messages.HeldLocks, messages.HeldLockList]{db: outboxDB,
		run: func(s *Store, tx *persistence.Tx, m *messages.HeldLocks, _ *actor.PID) (*messages.HeldLockList, error) {
			locks, err := s.outbox.HeldLocks(tx, m.Route)
			return &messages.HeldLockList{Locks: locks}, err
		}}),
	entry(spec[messages.RecordReservation, messages.ReservationRecorded]{db: outboxDB,
		run: func(s *Store, tx *persistence.Tx, m *messages.RecordReservation, _ *actor.PID) (*messages.ReservationRecorded, error) {
			return &messages.ReservationRecorded{}, s.outbox.RecordReservation(tx, m)
		},
		echo: func(m *messages.RecordReservation, r *messages.ReservationRecorded) { r.ID = m.ID }}),
	entry(spec[messages.HeldReservations, messages.HeldReservationList]{db: outboxDB,
		run: func(s *Store, tx *persistence.Tx, m *messages.HeldReservations, _ *actor.PID) (*messages.HeldReservationList, error) {
			grants, err := s.outbox.HeldReservations(tx, m.Route)
			return &messages.HeldReservationList{Grants: grants}, err
		}}),
	entry(spec[messages.AbandonHeldLocks, messages.LockRecorded]{db: outboxDB,
		run: func(s *Store, tx *persistence.Tx, m *messages.AbandonHeldLocks, _ *actor.PID) (*messages.LockRecorded, error) {
			return &messages.LockRecorded{}, s.outbox.AbandonHeldLocks(tx, m.Route)
		}}),
	// The names a route's broker link gave last (outbox.db), for sends by
	// name while the broker is away. Nothing waits for an fsync: names lost
	// in a power cut are the previous list's, which the next list replaces.
	entry(spec[messages.ReadKeptNames, messages.KeptNames]{db: outboxDB,
		run: func(s *Store, tx *persistence.Tx, m *messages.ReadKeptNames, _ *actor.PID) (*messages.KeptNames, error) {
			return s.outbox.KeptNames(tx, m.Route)
		}}),
	entry(spec[messages.KeepNames, none]{db: outboxDB,
		run: func(s *Store, tx *persistence.Tx, m *messages.KeepNames, _ *actor.PID) (*none, error) {
			return nil, s.outbox.KeepNames(tx, m)
		}}),
	entry(spec[messages.ForgetNames, none]{db: outboxDB,
		run: func(s *Store, tx *persistence.Tx, m *messages.ForgetNames, _ *actor.PID) (*none, error) {
			return nil, s.outbox.ForgetNames(tx, m.Route)
		}}),
	entry(spec[messages.OutboxStats, messages.OutboxCounts]{db: outboxDB,
		run: func(s *Store, tx *persistence.Tx, _ *messages.OutboxStats, _ *actor.PID) (*messages.OutboxCounts, error) {
			counts, err := s.outbox.Counts(tx)
			return &messages.OutboxCounts{ByMesh: counts, SyncBroken: s.syncBroken()}, err
		}}),

	// Dispatching (outbox.db, store_dispatch.go). Nothing here answers a
	// caller that was promised durability: a claim, outcome or release lost
	// in a power cut costs a resend, which the broker's dedupe answers.
	entry(spec[messages.DispatchReady, messages.OutcomeApplied]{db: outboxDB, run: (*Store).dispatchReady}),
	entry(spec[messages.DispatchWake, none]{db: outboxDB, run: (*Store).dispatchWake}),
	entry(spec[messages.SendOutcome, messages.OutcomeApplied]{db: outboxDB, hold: true, run: (*Store).sendOutcome}),
	entry(spec[messages.ReleaseMesh, messages.OutcomeApplied]{db: outboxDB, run: (*Store).releaseMesh}),

	// Received messages and the event log (inbox.db, store_inbox.go). A
	// stored message's reply waits for the fsync (the inbox actor acks it
	// to the broker on it); its event is published at the commit.
	entry(spec[messages.StoreInbound, messages.InboundStored]{db: inboxDB, durable: true, savepoint: true,
		run: (*Store).storeInbound, event: func(r *messages.InboundStored) *messages.Event { return r.Event },
		echo: func(m *messages.StoreInbound, r *messages.InboundStored) { r.ID = m.Item.ID }}),
	entry(spec[messages.AppendEvent, messages.EventAppended]{db: inboxDB, durable: true,
		run: (*Store).appendEvent, event: func(r *messages.EventAppended) *messages.Event { return r.Event }}),
	entry(spec[messages.ListInbox, messages.InboxPage]{db: inboxDB, savepoint: true, run: (*Store).listInbox}),
	entry(spec[messages.MarkInboxSeen, messages.InboxChanged]{db: inboxDB,
		run: func(s *Store, tx *persistence.Tx, m *messages.MarkInboxSeen, _ *actor.PID) (*messages.InboxChanged, error) {
			n, err := s.inbox.MarkSeen(tx, m.IDs, m.Mesh, m.Now)
			return &messages.InboxChanged{Rows: n}, err
		}}),
	entry(spec[messages.DeleteInbox, messages.InboxChanged]{db: inboxDB, durable: true,
		run: func(s *Store, tx *persistence.Tx, m *messages.DeleteInbox, _ *actor.PID) (*messages.InboxChanged, error) {
			n, err := s.inbox.DeleteRows(tx, persistence.InboxDeletion{ID: m.ID, Mesh: m.Mesh, Before: m.Before, All: m.All})
			return &messages.InboxChanged{Rows: n}, err
		}}),
	entry(spec[messages.EventsSince, messages.EventsPage]{db: inboxDB, run: (*Store).eventsSince}),

	// The agent-hook outbox (hooks.db, store_hooks.go), for the hooks
	// worker. Nothing waits for an fsync: a claim or outcome lost in a power
	// cut has a row handled again, which the handlers tolerate.
	entry(spec[messages.ClaimHooks, messages.HooksClaimed]{db: hooksDB, run: (*Store).claimHooks}),
	entry(spec[messages.FinishHooks, messages.HooksFinished]{db: hooksDB, run: (*Store).finishHooks}),
	entry(spec[messages.HookStats, messages.HookCounts]{db: hooksDB, run: (*Store).hookStats}),
	entry(spec[messages.PruneHooks, messages.HooksPruned]{db: hooksDB, run: (*Store).pruneHooks}),

	// Agent mail (store_mail.go). A receipt is recorded on its outbox row
	// before the inbox actor acks it to the broker: its reply waits for
	// outbox.db's fsync. An acknowledgement, a policy and a contact
	// decision are promised to their caller: they wait for inbox.db's.
	entry(spec[messages.RecordReceipt, messages.ReceiptRecorded]{db: outboxDB, durable: true, savepoint: true,
		run: (*Store).recordReceipt}),
	entry(spec[messages.ThreadOfOutbox, messages.ThreadFound]{db: outboxDB, run: (*Store).threadOfOutbox}),
	entry(spec[messages.GetInboxRow, messages.InboxRowFound]{db: inboxDB, run: (*Store).inboxRow}),
	entry(spec[messages.MarkInboxAcked, messages.InboxRowFound]{db: inboxDB, durable: true, savepoint: true,
		run: (*Store).markAcked}),
	entry(spec[messages.ThreadOfInbox, messages.ThreadFound]{db: inboxDB, run: (*Store).threadOfInbox}),
	entry(spec[messages.SearchInbox, messages.InboxPage]{db: inboxDB, run: (*Store).searchInbox}),
	entry(spec[messages.SetContactPolicy, messages.Contacts]{db: inboxDB, durable: true, savepoint: true,
		run: (*Store).setContactPolicy}),
	entry(spec[messages.ListContacts, messages.Contacts]{db: inboxDB,
		run: func(s *Store, tx *persistence.Tx, m *messages.ListContacts, _ *actor.PID) (*messages.Contacts, error) {
			return s.inbox.Contacts(tx, m.Mesh)
		}}),
	entry(spec[messages.ListContactRequests, messages.ContactRequests]{db: inboxDB, run: (*Store).contactRequests}),
	entry(spec[messages.NoteContact, none]{db: inboxDB, run: (*Store).noteContact}),
	entry(spec[messages.DecideContact, messages.ContactDecision]{db: inboxDB, durable: true, savepoint: true,
		run: (*Store).decideContact, events: func(r *messages.ContactDecision) []messages.Event { return r.Events }}),
	entry(spec[messages.ListExpiredRequests, messages.ExpiredRequests]{db: inboxDB,
		run: func(s *Store, tx *persistence.Tx, m *messages.ListExpiredRequests, _ *actor.PID) (*messages.ExpiredRequests, error) {
			items, next, err := s.inbox.ExpiredRequests(tx, m.Mesh, m.Now, m.Limit)
			return &messages.ExpiredRequests{Items: items, Next: next}, err
		}}),
	entry(spec[messages.DropExpiredRequests, messages.RequestsDropped]{db: inboxDB,
		run: func(s *Store, tx *persistence.Tx, m *messages.DropExpiredRequests, _ *actor.PID) (*messages.RequestsDropped, error) {
			n, err := s.inbox.DropExpiredRequests(tx, m.Mesh, m.IDs, m.Now)
			return &messages.RequestsDropped{Dropped: n}, err
		}}),

	// Retention passes (store_retention.go), sent by the store to itself.
	entry(spec[messages.PruneInbox, messages.Pruned]{db: inboxDB, savepoint: true, run: (*Store).pruneInbox}),
	entry(spec[messages.PruneOutbox, messages.Pruned]{db: outboxDB, savepoint: true, run: (*Store).pruneOutbox}),
)

// database is one of the store's files.
type database int

const (
	outboxDB database = iota
	inboxDB
	hooksDB   // the agent-hook outbox: no command promises its fsync
	databases // how many
)

// dbNames label the databases in logs and metrics.
var dbNames = [databases]string{outboxDB: "outbox", inboxDB: "inbox", hooksDB: "hooks"}

// command is one entry of the table, with the message and reply types
// erased.
type command struct {
	db database
	// durable: the reply waits until the batch is on disk, the fsync of
	// db's WAL; if that fsync fails, the reply is the failure.
	durable bool
	// savepoint: the command writes with several statements that stand or
	// fall together.
	savepoint bool
	// hold: the command answers no caller and needs no fsync; it waits up
	// to OutcomeDelay for a batch to ride with.
	hold bool
	// run executes the command in tx; from is who sent it.
	run func(s *Store, tx *persistence.Tx, msg any, from *actor.PID) (reply any, err error)
	// fail is msg's reply that carries err (nil: the command has no reply).
	fail func(msg any, err error) any
	// event is the event a committed reply publishes (nil: none); events,
	// the events, for a command that may append several.
	event  func(reply any) *messages.Event
	events func(reply any) []messages.Event
}

// promises says the command's reply waits for db's WAL fsync: on
// outbox.db an accept, a requeue or a drop; on inbox.db a stored message
// or event.
func (c *command) promises(db database) bool { return c.durable && c.db == db }

// none is the reply type of a command that answers nobody.
type none struct{}

// spec is a table entry as written: M is the message, R its reply.
type spec[M, R any] struct {
	db        database
	durable   bool
	savepoint bool
	hold      bool
	run       func(s *Store, tx *persistence.Tx, m *M, from *actor.PID) (*R, error)
	event     func(reply *R) *messages.Event
	events    func(reply *R) []messages.Event
	// echo copies what identifies the request into every reply to it, a
	// failure's too, for a sender with several requests in flight.
	echo func(m *M, reply *R)
}

// entry erases spec's types: the reply of a failed command is a new R with
// its Err field set.
func entry[M, R any](c spec[M, R]) tableEntry {
	cmd := &command{db: c.db, durable: c.durable, savepoint: c.savepoint, hold: c.hold,
		run: func(s *Store, tx *persistence.Tx, msg any, from *actor.PID) (any, error) {
			r, err := c.run(s, tx, msg.(*M), from)
			if r == nil {
				return nil, err
			}
			if c.echo != nil {
				c.echo(msg.(*M), r)
			}
			return r, err
		}}
	rt := reflect.TypeFor[R]()
	if rt != reflect.TypeFor[none]() {
		field, ok := rt.FieldByName("Err")
		if !ok || field.Type != reflect.TypeFor[error]() {
			panic(fmt.Sprintf("store command %v: reply %v has no field Err error", reflect.TypeFor[M](), rt))
		}
		cmd.fail = func(msg any, err error) any {
			r := new(R)
			reflect.ValueOf(r).Elem().FieldByIndex(field.Index).Set(reflect.ValueOf(&err).Elem())
			if c.echo != nil {
				c.echo(msg.(*M), r)
			}
			return r
		}
	}
	if c.event != nil {
		cmd.event = func(reply any) *messages.Event {
			if r, ok := reply.(*R); ok {
				return c.event(r)
			}
			return nil
		}
	}
	if c.events != nil {
		cmd.events = func(reply any) []messages.Event {
			if r, ok := reply.(*R); ok {
				return c.events(r)
			}
			return nil
		}
	}
	return tableEntry{msg: reflect.TypeFor[*M](), cmd: cmd}
}

// tableEntry is one erased entry with the pointer type it is for.
type tableEntry struct {
	msg reflect.Type
	cmd *command
}

func commandTable(entries ...tableEntry) map[reflect.Type]*command {
	table := make(map[reflect.Type]*command, len(entries))
	for _, e := range entries {
		if table[e.msg] != nil {
			panic(fmt.Sprintf("store command %v listed twice", e.msg))
		}
		table[e.msg] = e.cmd
	}
	return table
}

// failed is the reply that carries err for r's command; a full disk
// becomes 507 insufficient_storage.
func failed(r storeRequest, err error) any {
	if persistence.IsFull(err) {
		err = &messages.Error{Status: http.StatusInsufficientStorage, Code: messages.CodeInsufficientStorage,
			Detail: "the disk is full; nothing was stored: retry with the same client_message_id once there is space"}
	}
	if r.cmd.fail == nil {
		return nil
	}
	return r.cmd.fail(r.msg, err)
}
