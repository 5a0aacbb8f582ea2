package actors

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// DefaultMaxBatch bounds how many commands share one transaction.
const DefaultMaxBatch = 256

// Store is the only owner of the daemon's SQLite handles.
//
// Group commit: every command it receives is queued, and the first one of a
// batch sends the store a flush marker. Because the mailbox is FIFO, every
// command that arrived before the marker joins the batch; when the marker
// comes up, the batch runs in one BEGIN IMMEDIATE transaction with a
// SAVEPOINT per command, commits, and only then is each sender answered. A
// batch also runs as soon as it holds DefaultMaxBatch commands. Under load,
// one fsync covers many accepts; when idle, a command waits for no timer.
type Store struct {
	outbox   *persistence.Outbox
	log      *slog.Logger
	maxBatch int

	batch       []storeRequest
	flushQueued bool
}

type storeRequest struct {
	msg    any
	sender *actor.PID
}

// flush is the store's own end-of-drain marker.
type flush struct{}

// NewStore returns the store actor's producer. The outbox stays open across
// restarts; its owner (the daemon) closes it after the actor system stops.
func NewStore(outbox *persistence.Outbox, log *slog.Logger) actor.Producer {
	return func() actor.Actor {
		return &Store{outbox: outbox, log: log.With("actor", "store"), maxBatch: DefaultMaxBatch}
	}
}

// Receive handles one message.
func (s *Store) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	case *flush:
		s.flushQueued = false
		s.run(ctx)
	case *messages.AcceptSend, *messages.RequeueOutbox, *messages.ListOutbox, *messages.OutboxStats:
		s.enqueue(ctx, msg)
	default:
		s.log.Warn("unhandled message", "type", fmt.Sprintf("%T", msg))
	}
}

func (s *Store) enqueue(ctx actor.Context, msg any) {
	s.batch = append(s.batch, storeRequest{msg: msg, sender: ctx.Sender()})
	if len(s.batch) >= s.maxBatch {
		s.run(ctx)
		return
	}
	if !s.flushQueued {
		s.flushQueued = true
		ctx.Send(ctx.Self(), &flush{})
	}
}

// run executes the queued batch in one transaction and answers every sender
// after the commit. If the transaction cannot begin or commit, every sender
// gets the error and nothing of the batch is stored.
func (s *Store) run(ctx actor.Context) {
	if len(s.batch) == 0 {
		return
	}
	reqs := s.batch
	replies := make([]any, len(reqs))
	defer func() {
		for i, r := range reqs {
			ctx.Send(r.sender, replies[i])
		}
		clear(reqs)
		s.batch = reqs[:0]
	}()

	b, err := s.outbox.Begin(context.Background())
	if err != nil {
		s.failAll(reqs, replies, err)
		return
	}
	defer func() {
		if p := recover(); p != nil {
			b.Rollback()
			s.failAll(reqs, replies, fmt.Errorf("store panic: %v", p))
		}
	}()
	for i, r := range reqs {
		replies[i] = s.execute(b, r.msg)
	}
	if err := b.Commit(); err != nil {
		s.failAll(reqs, replies, fmt.Errorf("commit: %w", err))
		return
	}
	s.log.Debug("batch committed", "commands", len(reqs))
}

func (s *Store) failAll(reqs []storeRequest, replies []any, err error) {
	s.log.Error("store batch failed", "commands", len(reqs), "err", err)
	for i, r := range reqs {
		replies[i] = failed(r.msg, err)
	}
}

// execute runs one command in its own savepoint and returns its reply.
func (s *Store) execute(b *persistence.Batch, msg any) any {
	var reply any
	err := b.Do(func(tx *sqlx.Tx) (err error) {
		switch m := msg.(type) {
		case *messages.AcceptSend:
			reply, err = s.outbox.Accept(tx, m)
		case *messages.RequeueOutbox:
			reply, err = s.outbox.Requeue(tx, m)
		case *messages.ListOutbox:
			reply, err = s.outbox.List(tx, m)
		case *messages.OutboxStats:
			var counts map[string]map[string]int
			counts, err = s.outbox.Counts(tx)
			reply = &messages.OutboxCounts{ByMesh: counts}
		}
		return err
	})
	if err != nil {
		return failed(msg, err)
	}
	return reply
}

// failed is the reply carrying err for a command of msg's type.
func failed(msg any, err error) any {
	switch msg.(type) {
	case *messages.AcceptSend:
		return &messages.AcceptResult{Err: err}
	case *messages.RequeueOutbox:
		return &messages.RequeueResult{Err: err}
	case *messages.ListOutbox:
		return &messages.OutboxPage{Err: err}
	case *messages.OutboxStats:
		return &messages.OutboxCounts{Err: err}
	}
	return err
}
