// Package actors holds the daemon's actor tree (protoactor-go), spawned in
// this order:
//
//	daemon (root supervisor, one for one)
//	├── events     SSE fan-out: live streams of committed events
//	├── store      the only owner of the SQLite handles (outbox.db, inbox.db,
//	│              hooks.db); group commit
//	├── accept     one child per (mesh, client_message_id) in progress
//	├── hooks      the hook outbox's worker (with Deps.HookWorker; hooks.go)
//	└── mesh-<slug>  one subtree per served mesh: a membership, an agent's
//	    │            identity, or an agent session's route (all for one)
//	    ├── dispatcher  drains the outbox: claims, pipelines sends, applies acks
//	    ├── inbox       decrypts pushes, stores them deduplicated, acks, publishes
//	    └── broker      BrokerConn: the WebSocket (hello, negotiation, reconnect,
//	                    breaker) and the features relayed over it
//
// Actors share nothing mutable: they exchange the pointer structs of package
// messages (and a few of this package's own). Supervision is declared here:
// a failing child is restarted (at most MaxRestarts within RestartWindow); a
// panic inside a mesh restarts that mesh's subtree only, never the IPC
// surface or another mesh. A child that cannot be kept alive stops the
// daemon through the fatal channel.
package actors

import (
	"cmp"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/transport/ipc/metrics"
)

// Supervision limits.
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
	Events *actor.PID
	Hooks  *actor.PID          // the hook outbox's worker (nil without Deps.HookWorker)
	Meshes map[string]MeshPIDs // written by Attach and Detach under mu

	mu         *sync.Mutex
	meshActors map[string]*actor.PID // for Start to ask each mesh
}

// Deps are what the tree is built on.
type Deps struct {
	Outbox *persistence.Outbox
	Inbox  *persistence.Inbox
	// Hooks is hooks.db, the agent-hook outbox (nil: none); HookWorker,
	// when set, spawns its worker (hooks.go).
	Hooks      *persistence.Hooks
	HookWorker *HooksOptions
	Meshes     []MeshConfig
	Log        *slog.Logger
	Fatal      chan<- error
	// Metrics are the daemon's series (nil: a fresh, unserved set).
	Metrics *metrics.Daemon
	// Pressure is measured by the store after its writes (nil: not watched).
	Pressure *persistence.Pressure
	// Fsync is [outbox] fsync_mode (nil: strict).
	Fsync *config.FsyncPolicy
	// Retention is [inbox] and [outbox] retention_days.
	Retention messages.Retention
	// Faults are the tests' injected failures (nil: none, always in
	// production).
	Faults *Faults
}

// NewSystem returns an actor system whose own logs go to log.
func NewSystem(log *slog.Logger) *actor.ActorSystem {
	sysLog := log.With("component", "protoactor")
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return sysLog }))
}

// Start spawns the root supervisor and its children.
func Start(system *actor.ActorSystem, deps Deps) (*Tree, error) {
	if deps.Metrics == nil {
		deps.Metrics = metrics.New()
	}
	props := actor.PropsFromProducer(func() actor.Actor {
		return &root{deps: deps}
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
	t.System, t.Root, t.mu = system, pid, new(sync.Mutex)
	t.Meshes = map[string]MeshPIDs{}
	for slug, mesh := range t.meshActors {
		r, err := system.Root.RequestFuture(mesh, &meshChildren{}, meshStartTimeout).Result()
		if err != nil {
			return nil, fmt.Errorf("start mesh %s: %w", slug, err)
		}
		t.Meshes[slug] = *r.(*MeshPIDs)
	}
	return t, nil
}

// Attach starts the subtree of a mesh joined while the daemon runs and
// returns its actors. It is not safe to call concurrently with itself.
func (t *Tree) Attach(cfg MeshConfig) (MeshPIDs, error) {
	res, err := t.System.Root.RequestFuture(t.Root, &attachMesh{cfg: cfg}, meshStartTimeout).Result()
	if err != nil {
		return MeshPIDs{}, fmt.Errorf("attach mesh %s: %w", cfg.Slug, err)
	}
	mesh, ok := res.(*actor.PID)
	if !ok {
		return MeshPIDs{}, fmt.Errorf("attach mesh %s: %v", cfg.Slug, res)
	}
	r, err := t.System.Root.RequestFuture(mesh, &meshChildren{}, meshStartTimeout).Result()
	if err != nil {
		return MeshPIDs{}, fmt.Errorf("start mesh %s: %w", cfg.Slug, err)
	}
	pids := *r.(*MeshPIDs)
	t.mu.Lock()
	t.Meshes[cfg.Slug] = pids
	t.mu.Unlock()
	return pids, nil
}

// Conn is the broker connection of the mesh (or session route) slug, nil
// when none is attached.
func (t *Tree) Conn(slug string) *actor.PID {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.Meshes[slug].Conn
}

// Detach stops the subtree of a mesh that left config.json, and returns
// its rows that were in flight to pending (the store forgets its
// dispatcher). Its rows stay in the outbox for a later join.
func (t *Tree) Detach(slug string) error {
	t.mu.Lock()
	conn := t.Meshes[slug].Conn
	t.mu.Unlock()
	if conn != nil { // a session's locks are released before its subtree stops
		_, _ = t.System.Root.RequestFuture(conn, &endHolds{}, meshStartTimeout).Result()
	}
	res, err := t.System.Root.RequestFuture(t.Root, &detachMesh{slug: slug}, meshStartTimeout).Result()
	if err != nil {
		return fmt.Errorf("detach mesh %s: %w", slug, err)
	}
	mesh, ok := res.(*actor.PID)
	if !ok {
		return fmt.Errorf("detach mesh %s: %v", slug, res)
	}
	if err := t.System.Root.StopFuture(mesh).Wait(); err != nil {
		return fmt.Errorf("detach mesh %s: %w", slug, err)
	}
	t.mu.Lock()
	delete(t.Meshes, slug)
	t.mu.Unlock()
	t.System.Root.Send(t.Store, &messages.ReleaseMesh{Mesh: slug, Now: time.Now().UnixMilli()})
	return nil
}

// attachMesh asks the root for a new mesh subtree; the reply is its
// *actor.PID or an error. detachMesh asks it to forget one; the reply is
// the mesh actor's PID, which Detach stops and waits for, or an error.
type (
	attachMesh struct{ cfg MeshConfig }
	detachMesh struct{ slug string }
)

// restartDecider restarts any failing child.
func restartDecider(reason any) actor.Directive { return actor.RestartDirective }

// children asks the root for its children's PIDs; the reply is *Tree.
type children struct{}

type root struct {
	deps     Deps
	tree     Tree
	meshes   map[string]*actor.PID
	detached map[string]bool // ids of mesh actors stopped on purpose (Detach)
}

func (r *root) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		r.spawnChildren(ctx)
	case *actor.Stopping, *actor.Stopped, *actor.Restarting:
	case *actor.Terminated:
		r.childStopped(msg)
	case *children:
		t := r.tree
		t.meshActors = r.meshes
		ctx.Respond(&t)
	case *attachMesh:
		if _, ok := r.meshes[msg.cfg.Slug]; ok {
			ctx.Respond(fmt.Errorf("mesh %s is attached already", msg.cfg.Slug))
			return
		}
		pid, err := ctx.SpawnNamed(meshProps(msg.cfg, r.tree.Store, &r.deps), meshActorName(msg.cfg.Slug))
		if err != nil {
			ctx.Respond(fmt.Errorf("spawn mesh %s: %w", msg.cfg.Slug, err))
			return
		}
		r.meshes[msg.cfg.Slug] = pid
		ctx.Respond(pid)
	case *detachMesh:
		pid, ok := r.meshes[msg.slug]
		if !ok {
			ctx.Respond(fmt.Errorf("mesh %s is not attached", msg.slug))
			return
		}
		delete(r.meshes, msg.slug)
		if r.detached == nil {
			r.detached = map[string]bool{}
		}
		r.detached[pid.Id] = true
		ctx.Respond(pid) // Detach stops it and waits: a Stop here would let that wait end while it stops
	default:
		r.deps.Log.Warn("unhandled message", "actor", "daemon", "type", fmt.Sprintf("%T", msg))
	}
}

func (r *root) spawnChildren(ctx actor.Context) {
	log := r.deps.Log
	var err error
	spawn := func(name string, p *actor.Props) *actor.PID {
		if err != nil {
			return nil
		}
		var pid *actor.PID
		if pid, err = ctx.SpawnNamed(p, name); err != nil {
			r.fail(fmt.Errorf("spawn %s: %w", name, err))
		}
		return pid
	}
	r.tree.Events = spawn("events", workers.InlineProps(NewEvents(r.deps.Metrics, log)))
	r.tree.Store = spawn("store", workers.Props(NewStore(StoreOptions{Outbox: r.deps.Outbox, Inbox: r.deps.Inbox, Hooks: r.deps.Hooks,
		Pressure: r.deps.Pressure, Fsync: r.deps.Fsync, Retention: r.deps.Retention, Events: r.tree.Events, Faults: r.deps.Faults,
		Metrics: r.deps.Metrics, Log: log})))
	r.tree.Accept = spawn("accept", workers.InlineProps(newAcceptRouter(r.tree.Store, log, defaultAcceptTimings)))
	if w := r.deps.HookWorker; w != nil {
		opts := *w
		opts.Log = cmp.Or(opts.Log, log)
		r.tree.Hooks = spawn("hooks", workers.Props(NewHooks(r.tree.Store, opts)))
	}
	r.meshes = map[string]*actor.PID{}
	for _, cfg := range r.deps.Meshes {
		r.meshes[cfg.Slug] = spawn(meshActorName(cfg.Slug), meshProps(cfg, r.tree.Store, &r.deps))
	}
}

// meshActorName names a mesh's (or a session route's) subtree; a route's
// '/' would read as a level of the actor path.
func meshActorName(slug string) string { return "mesh-" + strings.ReplaceAll(slug, "/", "~") }

func (r *root) fail(err error) {
	select {
	case r.deps.Fatal <- err:
	default:
	}
}

// childStopped is reached when a child exhausted its restarts, or when the
// tree is shutting down (then the send to fatal is dropped: nobody reads it).
func (r *root) childStopped(msg *actor.Terminated) {
	if r.detached[msg.Who.Id] {
		delete(r.detached, msg.Who.Id)
		return
	}
	r.fail(fmt.Errorf("actor %s stopped", msg.Who.Id))
}
