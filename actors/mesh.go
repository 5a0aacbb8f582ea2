package actors

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/claudemesh/claudemesh-go/actors/workers"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/transport/ipc/metrics"
)

// MeshPIDs are the actors of one mesh's subtree that others talk to.
type MeshPIDs struct {
	Conn       *actor.PID // the broker connection: peers, profile, status
	Dispatcher *actor.PID // drains the outbox
	Inbox      *actor.PID // takes the connection's pushes
}

// meshActor supervises one mesh's subtree: dispatcher, inbox and broker
// connection. A failure in any of them restarts all three (their state
// refers to each other: the dispatcher's inflight rows, the connection),
// and nothing outside the mesh: the root supervises meshes one for one.
type meshActor struct {
	cfg     MeshConfig
	store   *actor.PID
	metrics *metrics.Daemon
	log     *slog.Logger
	fatal   chan<- error
	faults  *Faults
	pids    MeshPIDs
}

// meshChildren asks a mesh actor for its children; the reply is *MeshPIDs.
type meshChildren struct{}

func meshProps(cfg MeshConfig, store *actor.PID, deps *Deps) *actor.Props {
	cfg.pace = &paceBoard{}
	return actor.PropsFromProducer(func() actor.Actor {
		return &meshActor{cfg: cfg, store: store, metrics: deps.Metrics, log: deps.Log.With("mesh", cfg.Slug), fatal: deps.Fatal,
			faults: deps.Faults}
	}, actor.WithSupervisor(actor.NewAllForOneStrategy(MaxRestarts, RestartWindow, restartDecider)))
}

func (m *meshActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		m.spawn(ctx)
	case *actor.Stopping, *actor.Stopped, *actor.Restarting, *actor.Terminated:
	case *meshChildren:
		pids := m.pids
		ctx.Respond(&pids)
	default:
		m.log.Warn("unhandled message", "actor", "mesh", "type", fmt.Sprintf("%T", msg))
	}
}

func (m *meshActor) spawn(ctx actor.Context) {
	m.pids.Dispatcher = ctx.Spawn(workers.InlineProps(newDispatcher(m.cfg, m.store, m.metrics, m.log)))
	m.pids.Inbox = ctx.Spawn(workers.InlineProps(newInbox(m.cfg, m.store, m.metrics, m.log, m.faults)))
	m.pids.Conn = ctx.Spawn(workers.Props(newBrokerConn(m.cfg, m.store, m.pids.Dispatcher, m.pids.Inbox, m.metrics, m.log,
		m.fatal)))
}

// meshStartTimeout bounds the wait for a mesh subtree's children.
const meshStartTimeout = 5 * time.Second
