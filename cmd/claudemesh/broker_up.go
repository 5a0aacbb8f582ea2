package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	brokeractors "github.com/claudemesh/claudemesh-go/actors/broker"
	"github.com/claudemesh/claudemesh-go/cmd/internal/gctune"
	"github.com/claudemesh/claudemesh-go/cmd/internal/journal"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/ratelimit"
	"github.com/claudemesh/claudemesh-go/transport/cork"
	"github.com/claudemesh/claudemesh-go/transport/join"
	"github.com/claudemesh/claudemesh-go/transport/wsserver"
)

type brokerUpCmd struct {
	Listen                string        `default:"127.0.0.1:7900" placeholder:"ADDR" help:"Address to serve /ws, /join and /health on."`
	PublicURL             string        `name:"public-url" placeholder:"URL" help:"Base URL joiners reach this broker at (http or https), recorded in its database for claudemesh broker invite. Default: http:// and the address --listen bound (the hostname for a wildcard address)."`
	MaxPending            int           `name:"max-pending" default:"1024" placeholder:"N" help:"Connections not authenticated yet (every connection from its accept, a WebSocket until its hello), in all; past it a request is answered 429 and its connection closed."`
	MaxPendingPerIP       int           `name:"max-pending-per-ip" default:"32" placeholder:"N" help:"Connections not authenticated yet from one IP address (loopback addresses are bounded by --max-pending alone; a reverse proxy elsewhere is one address); past it a request is answered 429 and its connection closed."`
	NodeStaleAfter        time.Duration `name:"node-stale-after" default:"90s" placeholder:"DURATION" help:"How long a daemon's connection may go without a heartbeat (its pong to the broker's ping, every 30s) before claudemesh nodes lists it stale: its broker replica died, or the link hangs. On PostgreSQL, also how long an agent session unheard stays a recipient for the other replicas."`
	ReservationStaleAfter time.Duration `name:"reservation-stale-after" default:"90s" placeholder:"DURATION" help:"How long a reservation's holder may go without renewing it (a session's daemon renews at least every 20s) before another may force its reservations released (claudemesh reserve --force)."`
	PingInterval          time.Duration `name:"ping-interval" hidden:"" default:"30s" help:"Tests only: how often each connection is pinged, its heartbeat."`
	brokerStoreFlags      `embed:""`
	RedisURL              string        `name:"redis-url" env:"CLAUDEMESH_REDIS_URL" placeholder:"URL" help:"Redis for the rate limiter shared by several brokers (default: in memory)."`
	RateLimit             int           `default:"6000" help:"Messages per mesh per rate window."`
	RateWindow            string        `default:"1m" help:"Rate window (a Go duration)."`
	RelayPoll             time.Duration `name:"relay-poll" default:"2s" help:"PostgreSQL replicas: how often this broker looks for deliveries that waited unclaimed longer than this (a notification it missed: its LISTEN connection lost or silently dead) and pushes them to its connections; such a message arrives within twice this. One indexed query per look. 0 turns the look off. Ignored on SQLite (one broker)."`
	LogLevel              string        `default:"info" enum:"debug,info,warn,error" env:"CLAUDEMESH_LOG_LEVEL" help:"Minimum log level."`
	ShutdownFor           string        `hidden:"" default:"5s" help:"How long a shutdown waits for open requests."`
	LegacyProtocol        bool          `name:"legacy-protocol" hidden:"" help:"Interop tests only: speak only the upstream broker's protocol (no feature negotiation, upstream's ack shape and error strings, a token bucket of 10 refilled at --rate-limit per --rate-window per sender, refusals without retry-after)."`
	LegacyConcurrent      time.Duration `name:"legacy-concurrent" hidden:"" placeholder:"DURATION" help:"Interop tests only, with --legacy-protocol: handle a connection's frames concurrently, as the upstream broker does: each after a random delay of up to this, so that two sends of one connection may be stored, acked and pushed in the other order."`
}

func (c *brokerUpCmd) Run() error {
	gctune.Set(brokerGCPercent, gcMemoryLimit)
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.LogLevel))
	log := slog.New(journal.NewHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	window, err := time.ParseDuration(c.RateWindow)
	if err != nil {
		return &exitError{code: 2, err: fmt.Errorf("--rate-window: %w", err)}
	}
	if c.PingInterval <= 0 || c.NodeStaleAfter < c.PingInterval {
		return &exitError{code: 2, err: fmt.Errorf("--node-stale-after %s is shorter than the heartbeat interval (%s): every node would turn stale between two; give at least %s (default 90s, three heartbeats)",
			c.NodeStaleAfter, c.PingInterval, c.PingInterval)}
	}
	if c.ReservationStaleAfter < 2*messages.ReservationRenewEvery {
		return &exitError{code: 2, err: fmt.Errorf("--reservation-stale-after %s is shorter than two renewals (%s): a live holder could be forced; give at least %s (default 90s)",
			c.ReservationStaleAfter, 2*messages.ReservationRenewEvery, 2*messages.ReservationRenewEvery)}
	}
	if c.RelayPoll < 0 {
		return &exitError{code: 2, err: fmt.Errorf("--relay-poll %v: want a duration of 0 (off) or more, such as 2s", c.RelayPoll)}
	}
	relayPoll := c.RelayPoll
	if relayPoll == 0 {
		relayPoll = -1 // off: Options take 0 for the default
	}
	ctx := context.Background()
	c.serve = true
	store, err := c.open(ctx, false, log)
	if err != nil {
		return err
	}
	defer store.Close()
	limits := ratelimit.Options{Limit: c.RateLimit, Window: window}
	var limiter ratelimit.Limiter = ratelimit.NewMemory(limits)
	var legacy *brokeractors.LegacyProtocol
	switch {
	case c.LegacyConcurrent < 0 || c.LegacyConcurrent > 0 && !c.LegacyProtocol:
		return &exitError{code: 2, err: errors.New("--legacy-concurrent takes a positive duration, with --legacy-protocol")}
	case c.LegacyProtocol && c.RedisURL != "":
		return &exitError{code: 2, err: errors.New("--legacy-protocol limits in memory, as upstream does: drop --redis-url")}
	case c.LegacyProtocol:
		bucket := ratelimit.NewBucket(limits, 0)
		limiter = bucket
		legacy = &brokeractors.LegacyProtocol{PerMinute: bucket.PerMinute(), Burst: bucket.Burst(), HandlerDelay: c.LegacyConcurrent}
		log.Warn("legacy_protocol", "detail", "this broker speaks only the upstream protocol, for interop tests: no feature negotiation, no retry-after")
	case c.RedisURL != "":
		if limiter, err = ratelimit.NewRedis(ctx, c.RedisURL, limits); err != nil {
			return err
		}
	}
	defer limiter.Close()
	if c.MaxPending < 1 || c.MaxPendingPerIP < 1 {
		return &exitError{code: 2, err: errors.New("--max-pending and --max-pending-per-ip must be at least 1")}
	}
	if c.PublicURL != "" {
		if _, _, err := join.BrokerURLs(c.PublicURL); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--public-url: %w", err)}
		}
	}
	b, err := brokeractors.Start(brokeractors.Options{Store: store, Limiter: limiter, Extra: map[string]http.Handler{join.Path: join.Handler(store, log)}, Log: log,
		Limits: wsserver.Limits{Pending: c.MaxPending, PendingPerSource: c.MaxPendingPerIP, PingInterval: c.PingInterval},
		Legacy: legacy, NodeStaleAfter: c.NodeStaleAfter, RelayPoll: relayPoll,
		ReservationStaleAfter: c.ReservationStaleAfter})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", c.Listen)
	if err != nil {
		b.Close(ctx)
		return err
	}
	public := c.advertised(l.Addr())
	if err := store.SetSetting(ctx, broker.SettingPublicURL, public); err != nil {
		log.Warn("public_url_not_recorded", "url", public, "err", err) // invite then asks for --broker-url
	}
	sig := make(chan os.Signal, 1) // before serving: a signal must never find the default action
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	srv := b.HTTPServer()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(cork.Listener{Listener: l}) }()
	log.Info("broker_started", "listen", l.Addr().String(), "public_url", public, "backend", store.Backend(), "pid", os.Getpid())
	fmt.Fprintf(os.Stderr, "broker listening on %s (ws://%s/ws)\n", l.Addr(), l.Addr())
	fmt.Fprintf(os.Stderr, "invites link to %s (set with --public-url)\n", public)

	select {
	case s := <-sig:
		log.Info("broker_shutdown", "signal", s.String())
	case err := <-served:
		b.Close(ctx)
		return err
	}
	grace, _ := time.ParseDuration(c.ShutdownFor)
	shutdownCtx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	err = srv.Shutdown(shutdownCtx) // stops new requests and upgrades
	b.Close(shutdownCtx)            // then the WebSockets: close 1001
	return err
}

// advertised is --public-url, else http:// and the bound address; a
// wildcard address (0.0.0.0, ::) is replaced by the hostname, which is
// what another machine would use.
func (c *brokerUpCmd) advertised(bound net.Addr) string {
	if c.PublicURL != "" {
		return strings.TrimRight(c.PublicURL, "/")
	}
	host, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return "http://" + bound.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
		} else {
			host = "127.0.0.1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}
