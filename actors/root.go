// Package actors holds the daemon's actor tree (protoactor-go):
//
//	daemon (root supervisor)
//	├── store    the only owner of the SQLite handles; group commit
//	└── accept   one child per client_message_id in progress
//
// Actors share nothing mutable: they exchange the pointer structs of package
// messages. Supervision is declared once, here: a failing child is restarted
// (at most MaxRestarts within RestartWindow); a child that cannot be kept
// alive stops the daemon through the fatal channel, because a daemon without
// its store must not keep answering.
package actors

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/persistence"
)

// Supervision limits of the root.
const (
	MaxRestarts   = 10
	RestartWindow = time.Minute
)

// Tree is the running actor tree.
type Tree struct {
	System *actor.ActorSystem
	Root   *actor.PID
	Store  *actor.PID
	Accept *actor.PID
}

// NewSystem returns an actor system whose own logs go to log.
func NewSystem(log *slog.Logger) *actor.ActorSystem {
	sysLog := log.With("component", "protoactor")
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return sysLog }))
}

// Start spawns the root supervisor and its children. A child that stops for
// good is reported on fatal.
func Start(system *actor.ActorSystem, outbox *persistence.Outbox, log *slog.Logger, fatal chan<- error) (*Tree, error) {
	props := actor.PropsFromProducer(func() actor.Actor {
		return &root{outbox: outbox, log: log, fatal: fatal}
	}, actor.WithSupervisor(actor.NewOneForOneStrategy(MaxRestarts, RestartWindow, restartDecider)))
	pid, err := system.Root.SpawnNamed(props, "daemon")
	if err != nil {
		return nil, fmt.Errorf("spawn root: %w", err)
	}
	res, err := system.Root.RequestFuture(pid, &children{}, 5*time.Second).Result()
	if err != nil {
		return nil, fmt.Errorf("start actor tree: %w", err)
	}
	t := res.(*Tree)
	t.System, t.Root = system, pid
	return t, nil
}

// restartDecider restarts any failing child.
func restartDecider(reason any) actor.Directive { return actor.RestartDirective }

// children asks the root for its children's PIDs; the reply is *Tree.
type children struct{}

type root struct {
	outbox *persistence.Outbox
	log    *slog.Logger
	fatal  chan<- error
	store  *actor.PID
	accept *actor.PID
}

func (r *root) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		r.spawnChildren(ctx)
	case *actor.Stopping, *actor.Stopped, *actor.Restarting:
	case *actor.Terminated:
		r.childStopped(ctx, msg)
	case *children:
		ctx.Respond(&Tree{Store: r.store, Accept: r.accept})
	default:
		r.log.Warn("unhandled message", "actor", "daemon", "type", fmt.Sprintf("%T", msg))
	}
}

func (r *root) spawnChildren(ctx actor.Context) {
	var err error
	if r.store, err = ctx.SpawnNamed(actor.PropsFromProducer(NewStore(r.outbox, r.log)), "store"); err != nil {
		r.fatal <- fmt.Errorf("spawn store: %w", err)
		return
	}
	if r.accept, err = ctx.SpawnNamed(actor.PropsFromProducer(NewAcceptRouter(r.store, r.log)), "accept"); err != nil {
		r.fatal <- fmt.Errorf("spawn accept router: %w", err)
	}
}

// childStopped is reached when a child exhausted its restarts, or when the
// tree is shutting down (then the send to fatal is dropped: nobody reads it).
func (r *root) childStopped(ctx actor.Context, msg *actor.Terminated) {
	select {
	case r.fatal <- fmt.Errorf("actor %s stopped", msg.Who.Id):
	default:
	}
}
