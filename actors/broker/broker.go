package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
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
	// PresenceGrace is how long a dropped connection stays listed (0:
	// PresenceGrace, 90 s).
	PresenceGrace time.Duration
	// DeliveryLease is how long a push waits for its client_ack before it
	// is delivered again (0: DeliveryLease, 30 s).
	DeliveryLease time.Duration
	// RevocationCheck is how often the broker looks for members revoked
	// in its database (0: RevocationCheck, 5 s).
	RevocationCheck time.Duration
	// RelayPoll is how often, on PostgreSQL, the broker looks for
	// deliveries that waited unclaimed longer than it — a notification it
	// missed — and pushes them to its connections (0: DefaultRelayPoll,
	// 2 s; negative: never). A missed notification is made up for within
	// twice this. On SQLite, the only broker of its database, there is no
	// poll.
	RelayPoll time.Duration
	// Limits bound the connections that have not sent an accepted hello
	// yet: how long they may take, and how many one source address, and
	// all, may hold open (zero fields: wsserver's defaults, 5 s, 32 and
	// 1024); and set how often every connection is pinged (30 s).
	Limits wsserver.Limits
	// NodeStaleAfter is how long a daemon's connection may go without a
	// heartbeat before its node is listed stale (0: NodeStaleBeats ping
	// intervals, 90 s).
	NodeStaleAfter time.Duration
	// ReservationStaleAfter is how long a reservation's holder may go
	// without a renewal before another may force its reservations
	// released (0: messages.ReservationStaleAfter, 90 s).
	ReservationStaleAfter time.Duration
	// AckSyncDelay is how long, on SQLite, the accepts' reply syncer
	// gathers committed batches before each fsync that their acks wait
	// for (0: none, an fsync as soon as one is owed). Deliveries do not
	// wait for it. A daemon's embedded broker gathers (EmbeddedAckSyncDelay
	// in actors/daemon): its only sender is the daemon itself, whose outbox
	// holds each message durably until the ack and pipelines its sends,
	// and an fsync less per message leaves the disk to the fsyncs that
	// callers wait for.
	AckSyncDelay time.Duration
	// System is the actor system to spawn the broker's actors in (nil: a
	// system of its own, which Close shuts down). A daemon's embedded
	// broker shares the daemon's: a system's process registry alone is
	// several MB.
	System *actor.ActorSystem
	// Legacy, set, makes the broker speak only the upstream broker's
	// protocol, for interop tests (see LegacyProtocol).
	Legacy *LegacyProtocol
}

// Broker is a running broker: an actor tree and its HTTP handler.
type Broker struct {
	system        *actor.ActorSystem
	ownSystem     bool
	actors        []*actor.PID // hub, batchers, sweeper: stopped by Close in a shared system
	stopListening context.CancelFunc
	log           *slog.Logger
	handler       *wsserver.Server
	conns         atomic.Int64
	// live counts the connections' actors still running: Close waits for
	// them, so that what their close writes (node and session rows, the
	// hub's unregister) is done before the store closes.
	live *sync.WaitGroup
	// acceptsDurable is the accepts batcher's durability (SQLite), nil
	// when its commits are durable themselves (PostgreSQL).
	acceptsDurable *durability[broker.AcceptResult]
}

// Start spawns the broker's actors and returns the broker; serve its
// Handler on the listen address.
func Start(opts Options) (*Broker, error) {
	opts = opts.withDefaults()
	if err := releaseOwnLeases(opts.Store, opts.Log); err != nil {
		return nil, err
	}
	system, ownSystem := opts.System, opts.System == nil
	if ownSystem {
		sysLog := opts.Log.With("component", "protoactor")
		system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return sysLog }))
	}
	m := newMetrics()
	d := &deps{store: opts.Store, limiter: opts.Limiter, log: opts.Log.With("component", "broker"), now: opts.Now,
		metrics: m, lease: opts.DeliveryLease, legacy: opts.Legacy, staleAfter: opts.NodeStaleAfter, grace: opts.PresenceGrace,
		reservationStale: opts.ReservationStaleAfter, replica: fmt.Sprintf("broker-%s", ulid.Make())}
	b := &Broker{system: system, ownSystem: ownSystem, log: opts.Log, live: &d.live}
	if err := b.spawnActors(d, m, opts); err != nil {
		b.stopActors()
		return nil, fmt.Errorf("spawn broker actors: %w", err)
	}
	system.Root.Send(d.hub, &hubSweeper{pid: d.sweeper})
	b.listen(d)
	b.handler = wsserver.New(func(c *wsserver.Conn) wsserver.Session {
		id := fmt.Sprintf("conn-%d", b.conns.Add(1))
		m.connections.Inc()
		d.live.Add(1)
		pid, err := system.Root.SpawnNamed(workers.Props(func() actor.Actor {
			return &conn{deps: d, id: id, link: c}
		}), "broker/"+id)
		if err != nil {
			d.live.Done() // never started
		}
		return &session{root: system.Root, pid: pid}
	}, b.health, withMetrics(opts.Extra, m), opts.Limits, opts.Log)
	return b, nil
}

// withDefaults is opts with every zero tunable set to its default.
func (opts Options) withDefaults() Options {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.DeliveryLease = cmp.Or(opts.DeliveryLease, DeliveryLease)
	opts.PresenceGrace = cmp.Or(opts.PresenceGrace, PresenceGrace)
	opts.RevocationCheck = cmp.Or(opts.RevocationCheck, RevocationCheck)
	opts.RelayPoll = cmp.Or(opts.RelayPoll, DefaultRelayPoll)
	opts.NodeStaleAfter = cmp.Or(opts.NodeStaleAfter, NodeStaleBeats*cmp.Or(opts.Limits.PingInterval, wsserver.PingInterval))
	opts.ReservationStaleAfter = cmp.Or(opts.ReservationStaleAfter, messages.ReservationStaleAfter)
	return opts
}

// releaseOwnLeases frees, on SQLite, the delivery leases left in the
// store: a SQLite broker is the only one of its database, so its old
// leases died with it.
func releaseOwnLeases(store *broker.Store, log *slog.Logger) error {
	if store.Backend() != "sqlite" {
		return nil
	}
	n, err := store.ReleaseLeases(context.Background())
	if err != nil {
		return err
	}
	if n > 0 {
		log.Info("delivery_leases_released", "rows", n)
	}
	return nil
}

// spawnActors spawns the hub, the batchers, the sweeper and, on
// PostgreSQL, the relay into b's system, recording them in d and b. On an
// error the actors spawned so far are in b.actors, for stopActors.
func (b *Broker) spawnActors(d *deps, m *metrics, opts Options) error {
	var err error
	spawn := func(name string, p actor.Producer) *actor.PID {
		if err != nil {
			return nil
		}
		var pid *actor.PID
		pid, err = b.system.Root.SpawnNamed(workers.Props(p), "broker/"+name)
		return pid
	}
	maxBatch := 256
	if opts.Store.Backend() == "postgres" {
		maxBatch = 64 // the store's per-request fallback keeps PG's subtransaction cache
	}
	d.hub = spawn("hub", newHub(opts.Store, m, opts.PresenceGrace, opts.Log))
	b.acceptsDurable = acceptDurability(opts.Store, opts.AckSyncDelay)
	d.accepts = spawn("accepts", newBatcher("accepts", maxBatch, func(jobs []*acceptJob) []broker.AcceptResult {
		return d.acceptBatch(b.system.Root, jobs)
	}, nil, 0, b.acceptsDurable, opts.Log))
	// Acks answer no one: each waits up to AckDelay for others to share its
	// transaction.
	d.acks = spawn("acks", newBatcher("acks", maxBatch, func(acks []broker.Ack) []struct{} {
		if _, err := opts.Store.AckDeliveries(context.Background(), acks); err != nil {
			opts.Log.Error("ack deliveries", "acks", len(acks), "err", err)
		}
		return make([]struct{}, len(acks))
	}, func(broker.Ack) bool { return true }, AckDelay, nil, opts.Log))
	d.sweeper = spawn("sweeper", newSweeper(opts.Store, m, d.hub, opts.Log, opts.Now, opts.RevocationCheck))
	b.actors = []*actor.PID{d.hub, d.accepts, d.acks, d.sweeper}
	if opts.Store.Backend() == "postgres" && opts.RelayPoll > 0 {
		b.actors = append(b.actors, spawn("relay", newRelay(opts.Store, m, d.hub, opts.Log, opts.Now, opts.RelayPoll)))
	}
	return err
}

// listen starts listening for the other brokers of the store (deliveries,
// state changes, lock and reservation releases, session takeovers) until
// Close; on PostgreSQL it returns once each LISTEN is up (startListening).
func (b *Broker) listen(d *deps) {
	ctx, stop := context.WithCancel(context.Background())
	b.stopListening = stop
	root := b.system.Root
	startListening(ctx, d, "delivery", func(connected func()) {
		_ = d.store.Listen(ctx, func(rs []broker.Recipient) {
			root.Send(d.hub, &hubRedeliver{recipients: rs, all: rs == nil})
			if rs == nil { // (re)connected: every connection here drains, then Start may serve
				connected()
			}
		})
	})
	listenState(ctx, d, root)
	listenLocks(ctx, d, root)
	listenReservations(ctx, d, root)
	listenSessions(ctx, d, root)
}

// Handler is the broker's HTTP handler: /ws, /health and the extras.
func (b *Broker) Handler() http.Handler { return b.handler }

// HTTPServer is an http.Server of Handler with the broker's timeouts, and
// every connection counted against the caps of unauthenticated ones from
// its accept (wsserver.Server.HTTPServer).
func (b *Broker) HTTPServer() *http.Server { return b.handler.HTTPServer() }

func (b *Broker) health() any {
	if b.acceptsDurable != nil && b.acceptsDurable.brokenBy() != nil {
		// Its store can no longer promise what it accepts: restart it.
		return map[string]any{"status": "degraded", "wal_sync_failed": true, "connections_opened": b.conns.Load()}
	}
	return map[string]any{"status": "ok", "connections_opened": b.conns.Load()}
}

// Close says goodbye to every connection (1001) and waits, at most as long
// as ctx allows, for their actors to have written their close, then stops
// listening for other brokers and stops the actors. Close the HTTP server
// first, so that it takes no more requests; an upgrade it left running is
// waited for, or refused (wsserver.Server.Shutdown).
func (b *Broker) Close(ctx context.Context) {
	if err := b.handler.Shutdown(ctx); err != nil {
		b.log.Warn("connections did not close in time", "err", err)
	}
	stopped := make(chan struct{})
	go func() { b.live.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		b.log.Warn("connections' actors did not stop in time", "err", ctx.Err())
	}
	b.stopListening()
	b.stopActors()
}

// stopActors stops the broker's actors, each after the message in hand
// (a store call, perhaps: none outlives Close, so the store can be closed
// next), then shuts down the broker's own system. Its connections' actors
// stop as their sockets close.
func (b *Broker) stopActors() {
	for _, pid := range b.actors {
		if pid != nil {
			if err := b.system.Root.StopFuture(pid).Wait(); err != nil {
				b.log.Warn("broker actor did not stop in time", "actor", pid.Id, "err", err)
			}
		}
	}
	if b.ownSystem {
		b.system.Shutdown()
	}
}

// acceptBatch runs one accept transaction for the jobs, then pushes each
// committed message to the recipients connected here (their rows were
// created leased for that push) and announces the others to the other
// brokers. The pushes go from here, not from the sender's connection, so a
// sender that vanishes mid-accept cannot strand a leased row. They go at
// the commit, before its fsync (see broker.Store.AcceptBatch); the senders'
// acks wait for it (the batcher's durability).
func (d *deps) acceptBatch(root *actor.RootContext, jobs []*acceptJob) []broker.AcceptResult {
	d.metrics.acceptBatch.Observe(float64(len(jobs)))
	reqs := make([]*broker.AcceptRequest, len(jobs))
	for i, j := range jobs {
		reqs[i] = j.req
	}
	results := d.store.AcceptBatch(context.Background(), reqs)
	var waiting []broker.Recipient
	leased := false
	for i, j := range jobs {
		if results[i].Outcome != broker.Created {
			continue
		}
		if len(j.req.Online) > 0 {
			if frame, err := json.Marshal(j.push(&results[i])); err == nil {
				root.Send(d.hub, &hubFanout{meshID: j.req.MeshID, senderConn: j.senderConn, recipients: j.req.Online, frame: frame})
				leased = true
			}
		}
		for _, pk := range j.req.Recipients {
			r := broker.Recipient{MeshID: j.req.MeshID, Pubkey: pk}
			if !slices.Contains(j.req.Online, pk) && !slices.Contains(waiting, r) {
				waiting = append(waiting, r)
			}
		}
	}
	if leased {
		root.Send(d.sweeper, &leaseTaken{at: d.now().Add(d.lease)})
	}
	if len(waiting) > 0 && d.store.Backend() == "sqlite" {
		// A recipient resolved offline may have connected, and drained its
		// queue, between the resolve and this commit: it drains again. (On
		// PostgreSQL the accept's transaction NOTIFYed the recipients'
		// replicas, this one's own listener included.)
		root.Send(d.hub, &hubRedeliver{recipients: waiting})
	}
	return results
}

// acceptDurability is the accepts batcher's on SQLite, whose accept
// commits skip the fsync; a PostgreSQL commit is durable when it returns.
func acceptDurability(store *broker.Store, delay time.Duration) *durability[broker.AcceptResult] {
	if store.Backend() != "sqlite" {
		return nil
	}
	return &durability[broker.AcceptResult]{sync: store.SyncWAL, delay: delay, failed: failedAccept}
}

// failedAccept is what an accept answers when the fsync that was to make
// it durable failed: the sender retries with the same id.
func failedAccept(_ broker.AcceptResult, err error) broker.AcceptResult {
	return broker.AcceptResult{Outcome: broker.Failed, Err: fmt.Errorf("accept: make durable: %w", err)}
}

// withMetrics adds GET /metrics to the extra handlers.
func withMetrics(extra map[string]http.Handler, m *metrics) map[string]http.Handler {
	out := map[string]http.Handler{"GET /metrics": m.handler()}
	for pattern, h := range extra {
		out[pattern] = h
	}
	return out
}
