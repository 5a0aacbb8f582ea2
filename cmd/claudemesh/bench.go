package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"time"

	"github.com/claudemesh/claudemesh-go/cmd/claudemesh/internal/bench"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

type benchCmd struct {
	Mode          string        `enum:"accept,e2e,broker,startup,sessions,backlog" default:"accept" help:"What to measure: accept (POST /v1/send to the 202), e2e (alice's daemon → broker → bob's event stream), broker (sends straight to a broker over WebSockets, to its ack), startup (exec of the daemon to its first answer, --count times, and its memory), sessions (--sessions agent sessions on one daemon's embedded broker, DMs from each to the next, and the daemon's memory), backlog (--count DMs queued at once against the broker's --rate-limit: refused attempts per delivered message, the daemon's CPU-seconds per minute, order and loss)."`
	Sessions      int           `default:"100" help:"sessions mode: agent sessions to register."`
	Clients       int           `default:"64" help:"Concurrent senders."`
	Count         int           `default:"10000" help:"Messages to send (0: send for --duration)."`
	Duration      time.Duration `help:"Send for this long instead of --count messages (e.g. 30s)."`
	Rate          int           `help:"Messages per second to offer (open loop: latency counts from each message's due time); 0: as fast as the clients go."`
	Size          int           `default:"64" help:"Message body bytes."`
	SelfContained bool          `name:"self-contained" help:"Start a throwaway broker and daemons in a temporary directory and measure them (needed for e2e and broker)."`
	DatabaseURL   string        `name:"database-url" placeholder:"URL" help:"--self-contained: run the broker on this PostgreSQL database (in a mesh of its own) instead of SQLite."`
	FsyncMode     string        `name:"fsync-mode" enum:",strict,batched_50ms,off" default:"" help:"--self-contained: the [outbox] fsync_mode of the daemons it starts (default: theirs, strict)."`
	Profile       string        `name:"profile" placeholder:"DIR" type:"existingdir" help:"--self-contained: each process the run starts writes its CPU profile to DIR/<broker|alice|bob>.pprof (read them with go tool pprof)."`
	Connections   int           `default:"1" help:"broker mode: WebSockets to spread the clients over."`
	Pending       int           `help:"startup mode: rows to put in the outbox (through POST /v1/send) before timing the starts."`
	RateLimit     int           `name:"rate-limit" default:"600" help:"backlog mode: the broker's limit, messages per --rate-window."`
	RateWindow    time.Duration `name:"rate-window" default:"1m" help:"backlog mode: the broker's rate window."`
	LegacyBroker  bool          `name:"legacy-broker" help:"backlog mode: run the broker in its legacy test mode (upstream's token bucket of 10 refilled at the same rate, refusals without retry-after) and the daemons with [features] legacy_broker."`
	Concurrent    time.Duration `name:"legacy-concurrent" placeholder:"DURATION" help:"With --legacy-broker: the broker handles a connection's frames concurrently, as upstream's does, each after a random delay of up to this (e.g. 5ms), so that sends in flight together may be stored and pushed in either order."`
	Mesh          string        `placeholder:"SLUG" help:"Without --self-contained: the mesh to send on (default: the only one)."`
	To            string        `placeholder:"DEST" help:"Without --self-contained: where to send (default @bench; e2e: the receiver's member pubkey)."`
	Receiver      string        `type:"path" placeholder:"SOCKET" help:"e2e without --self-contained: the receiving daemon's socket (the sender is the running daemon)."`
	JSON          bool          `name:"json" help:"Print the report as one JSON object."`
}

func (c *benchCmd) Run() error {
	if c.Count == 0 && c.Duration <= 0 {
		return usageErr("give --count or --duration")
	}
	if c.Duration > 0 {
		c.Count = 0
	}
	if c.Clients < 1 || c.Size < 1 || c.Rate < 0 || c.Connections < 1 {
		return usageErr("--clients, --size and --connections must be at least 1, --rate not negative")
	}
	if c.Mode == bench.ModeBacklog && (c.RateLimit < 1 || c.RateWindow <= 0 || c.Count < 1) {
		return usageErr("--mode backlog needs --count, and a --rate-limit and --rate-window above zero")
	}
	if (c.DatabaseURL != "" || c.FsyncMode != "" || c.Profile != "") && !c.SelfContained {
		return usageErr("--database-url, --fsync-mode and --profile are for --self-contained runs")
	}
	if c.Concurrent < 0 || c.Concurrent > 0 && !c.LegacyBroker {
		return usageErr("--legacy-concurrent takes a positive duration, with --legacy-broker")
	}
	opts := bench.Options{Mode: c.Mode, Clients: c.Clients, Count: c.Count, Duration: c.Duration, Rate: c.Rate, Size: c.Size,
		Connections: c.Connections, Pending: c.Pending, FsyncMode: c.FsyncMode, Sessions: c.Sessions,
		RateLimit: c.RateLimit, RateWindow: c.RateWindow, LegacyBroker: c.LegacyBroker, Concurrent: c.Concurrent, ProfileDir: c.Profile}
	if !c.JSON && isTerminal(os.Stderr) {
		opts.Progress = func(p bench.Progress) {
			fmt.Fprintf(os.Stderr, "\r%6.1fs  %8d done  %8.0f/s  p50 %7.2f ms  p99 %7.2f ms  errors %d   ",
				p.Elapsed.Seconds(), p.Done, p.Rate, p.LatencyMs.P50, p.LatencyMs.P99, p.Errors)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var rep *bench.Report
	var d *ipc.Daemon // the running daemon measured, when it is one
	var err error
	switch {
	case c.SelfContained:
		bin, berr := os.Executable()
		if berr != nil {
			return berr
		}
		rep, err = bench.RunSelfContained(ctx, opts, bin, c.DatabaseURL)
	default:
		var t bench.Target
		if t, d, err = c.target(); err != nil {
			return err
		}
		rep, err = bench.Run(ctx, opts, t)
	}
	if opts.Progress != nil {
		fmt.Fprintln(os.Stderr)
	}
	if err != nil {
		return err
	}
	if c.JSON {
		return printWithDaemon(rep, d)
	}
	printReport(rep)
	return nil
}

// target is what a run without --self-contained measures: the running
// daemon, ours or upstream's (accept; e2e with --receiver and --to), or the
// broker of a joined mesh as its member (broker).
func (c *benchCmd) target() (bench.Target, *ipc.Daemon, error) {
	paths, err := config.ResolvePaths()
	if err != nil {
		return bench.Target{}, nil, &exitError{code: 2, err: err}
	}
	t := bench.Target{Socket: paths.Socket(), Mesh: c.Mesh, To: c.To, Receiver: c.Receiver}
	switch c.Mode {
	case bench.ModeStartup, bench.ModeSessions, bench.ModeBacklog:
		return t, nil, usageErr("--mode %s needs --self-contained (it starts the daemons it measures)", c.Mode)
	case bench.ModeE2E:
		if c.Receiver == "" || c.To == "" {
			return t, nil, usageErr("--mode e2e needs --self-contained, or --receiver <socket> and --to <its member pubkey>")
		}
	case bench.ModeBroker:
		s := &sendCmd{Mesh: c.Mesh}
		if t.Member, err = s.coldMembership(paths); err != nil {
			return t, nil, err
		}
		return t, nil, nil
	}
	d, err := ipc.Detect(paths.Socket())
	if err != nil {
		return t, nil, &exitError{code: 1, err: fmt.Errorf("no usable daemon answers on %s (start one with `claudemesh daemon up`, or use --self-contained): %w", paths.Socket(), err)}
	}
	if err := d.Require("send", "bench --mode "+c.Mode); err != nil {
		return t, nil, &exitError{code: 1, err: err}
	}
	return t, d, nil
}

func printReport(r *bench.Report) {
	if r.Mode == bench.ModeStartup {
		l := r.LatencyMs
		fmt.Printf("mode startup, %d starts with %d rows pending\n", r.Sent, r.Pending)
		fmt.Printf("exec → first answer ms: p50 %.2f  p90 %.2f  max %.2f\n", l.P50, l.P90, l.Max)
		fmt.Printf("resident memory once serving: %.1f MB\n", r.RSSMB)
		return
	}
	fmt.Printf("mode %s, %d clients, %d-byte messages", r.Mode, r.Clients, r.Size)
	if r.Rate > 0 {
		fmt.Printf(", offered %d/s", r.Rate)
	}
	fmt.Printf("\nsent %d, delivered %d in %.2f s: %.0f msgs/s\n", r.Sent, r.Delivered, r.ElapsedS, r.Throughput)
	if l := r.LatencyMs; r.Mode != bench.ModeBacklog { // a backlog run times no message
		fmt.Printf("latency ms: p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f\n", l.P50, l.P90, l.P99, l.P999, l.Max)
	}
	if r.Mode == bench.ModeE2E || r.Mode == bench.ModeSessions || r.Mode == bench.ModeBacklog {
		fmt.Printf("lost %d, duplicates %d\n", r.Lost, r.Duplicates)
	}
	if r.Mode == bench.ModeBacklog {
		fmt.Printf("rate-limit refusals %d: %.3f per delivered message; alice's daemon %.3f CPU-s per minute\n",
			r.Refused, float64(r.Refused)/float64(max(r.Delivered, 1)), r.DaemonCPUSPerMin)
	}
	if r.Mode == bench.ModeSessions {
		fmt.Printf("%d sessions; daemon resident memory after the run: %.1f MB\n", r.Sessions, r.RSSMB)
	}
	if len(r.CPUMsPerMsg) > 0 {
		fmt.Print("cpu ms per message:")
		for _, role := range []string{"broker", "alice", "bob", "client", "total"} {
			if v, ok := r.CPUMsPerMsg[role]; ok {
				fmt.Printf("  %s %.3f", role, v)
			}
		}
		fmt.Println()
	}
	codes := make([]string, 0, len(r.Errors))
	for code := range r.Errors {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	for _, code := range codes {
		fmt.Printf("error %s: %d\n", code, r.Errors[code])
	}
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
