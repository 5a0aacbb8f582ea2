package broker

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/ratelimit"
	"github.com/claudemesh/claudemesh-go/transport/wsserver"
)

// Options configure a broker.
type Options struct {
	Store   *broker.Store
	Limiter ratelimit.Limiter
	// Extra HTTP handlers to mount (the join endpoint), by pattern.
	Extra map[string]http.Handler
	Log   *slog.Logger
	Now   func() time.Time // nil: time.Now
}

// Broker is a running broker: an actor tree and its HTTP handler.
type Broker struct {
	system  *actor.ActorSystem
	root    *actor.PID
	handler *wsserver.Server
	conns   atomic.Int64
}

// Start spawns the broker's actors and returns the broker; serve its
// Handler on the listen address.
func Start(opts Options) (*Broker, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	system := actors.NewSystem(opts.Log)
	maxBatch := 256
	if opts.Store.Backend() == "postgres" {
		maxBatch = 64 // the store's per-request fallback keeps PG's subtransaction cache
	}
	d := &deps{store: opts.Store, limiter: opts.Limiter, log: opts.Log.With("component", "broker"), now: opts.Now}
	var err error
	spawn := func(name string, p actor.Producer) *actor.PID {
		if err != nil {
			return nil
		}
		var pid *actor.PID
		pid, err = system.Root.SpawnNamed(actor.PropsFromProducer(p), "broker/"+name)
		return pid
	}
	d.hub = spawn("hub", newHub(opts.Store, opts.Log))
	d.accepts = spawn("accepts", newBatcher("accepts", maxBatch, func(reqs []*broker.AcceptRequest) []broker.AcceptResult {
		return opts.Store.AcceptBatch(context.Background(), reqs)
	}, opts.Log))
	d.acks = spawn("acks", newBatcher("acks", maxBatch, func(acks []broker.Ack) []struct{} {
		if _, err := opts.Store.AckDeliveries(context.Background(), acks); err != nil {
			opts.Log.Error("ack deliveries", "acks", len(acks), "err", err)
		}
		return make([]struct{}, len(acks))
	}, opts.Log))
	spawn("sweeper", newSweeper(opts.Store, d.hub, opts.Log, opts.Now))
	if err != nil {
		system.Shutdown()
		return nil, fmt.Errorf("spawn broker actors: %w", err)
	}
	b := &Broker{system: system}
	b.handler = wsserver.New(func(c *wsserver.Conn) wsserver.Session {
		id := fmt.Sprintf("conn-%d", b.conns.Add(1))
		pid, _ := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
			return &conn{deps: d, id: id, link: c}
		}), "broker/"+id)
		return &session{root: system.Root, pid: pid}
	}, b.health, opts.Extra, opts.Log)
	return b, nil
}

// Handler is the broker's HTTP handler: /ws, /health and the extras.
func (b *Broker) Handler() http.Handler { return b.handler }

func (b *Broker) health() any {
	return map[string]any{"status": "ok", "connections_opened": b.conns.Load()}
}

// Close stops the actors.
func (b *Broker) Close() { b.system.Shutdown() }
