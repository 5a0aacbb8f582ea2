package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	brokeractors "github.com/claudemesh/claudemesh-go/actors/broker"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/ratelimit"
	"github.com/claudemesh/claudemesh-go/transport/cork"
)

// EmbeddedRateLimit is the embedded broker's budget per mesh and minute:
// it serves one machine's agents, whose daemon already bounds them.
const EmbeddedRateLimit = 1_000_000

// EmbeddedAckSyncDelay is how long the embedded broker gathers accepts
// before the fsync their acks wait for (brokeractors.Options.AckSyncDelay):
// the daemon's outbox keeps each message until its ack, so a later ack
// costs nothing but a row in flight a little longer, and under a steady
// stream one fsync covers many accepts instead of one each.
const EmbeddedAckSyncDelay = 5 * time.Millisecond

// embeddedBroker is the broker a daemon runs in-process for memberships
// with no brokerUrl (the `local` mesh): SQLite in <daemon dir>/broker, on a
// loopback port the kernel picks, so agents on one machine can message each
// other with nothing else set up. The daemon's own connections to it go
// through pipes instead (pipeListener).
type embeddedBroker struct {
	store  *broker.Store
	broker *brokeractors.Broker
	srv    *http.Server
	url    string
	pipes  *pipeListener
}

// startEmbeddedBroker opens the broker's store, registers the local
// memberships in it (mesh and member with the ids config.json records) and
// serves it on 127.0.0.1.
func (d *Daemon) startEmbeddedBroker(local []config.Membership, system *actor.ActorSystem) (*embeddedBroker, error) {
	ctx := context.Background()
	store, err := broker.Open(ctx, broker.Options{Dir: filepath.Join(d.opts.Paths.DaemonDir, "broker"), Log: d.log, Serve: true})
	if err != nil {
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	e := &embeddedBroker{store: store}
	for _, m := range local {
		if err := register(ctx, store, m); err != nil {
			e.close()
			return nil, fmt.Errorf("embedded broker: register %s: %w", m.Slug, err)
		}
	}
	if e.broker, err = brokeractors.Start(brokeractors.Options{Store: store, System: system, AckSyncDelay: EmbeddedAckSyncDelay,
		Limiter: ratelimit.NewMemory(ratelimit.Options{Limit: EmbeddedRateLimit, Window: time.Minute}), Log: d.log.With("component", "embedded-broker")}); err != nil {
		e.close()
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.close()
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	e.url = "ws://" + l.Addr().String() + "/ws"
	e.srv = e.broker.HTTPServer()
	e.pipes = newPipeListener()
	go func() { d.fail(ignoreClosed(e.srv.Serve(cork.Listener{Listener: l}))) }()
	go func() { d.fail(ignoreClosed(e.srv.Serve(cork.Listener{Listener: e.pipes}))) }()
	return e, nil
}

func register(ctx context.Context, store *broker.Store, m config.Membership) error {
	mesh, err := store.MeshByID(ctx, m.MeshID)
	if errors.Is(err, broker.ErrMeshNotFound) {
		mesh, err = store.CreateMesh(ctx, broker.Mesh{ID: m.MeshID, Slug: m.Slug})
	}
	if err != nil {
		return err
	}
	_, err = store.AddMember(ctx, mesh.ID, m.MemberID, m.Pubkey, m.Name)
	return err
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (e *embeddedBroker) close() {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if e.srv != nil {
		e.srv.Shutdown(ctx)
	}
	if e.broker != nil {
		e.broker.Close(ctx)
	}
	e.store.Close()
}
