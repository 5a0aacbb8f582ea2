// Package bench measures claudemesh the way its users meet it, in the
// spirit of `nats bench` and `redis-benchmark`: `claudemesh bench` drives a
// running daemon, or a throwaway broker and daemons it starts in a temporary
// directory (self-contained), and reports throughput, latency percentiles,
// errors by code, and — where a receiver is watched — lost and duplicated
// messages.
//
// Modes:
//   - accept: POST /v1/send to a daemon's socket; latency is the 202 (the
//     durable accept).
//   - e2e: alice's daemon → broker → bob's daemon; latency runs from alice's
//     POST /v1/send to the `message` event on bob's /v1/events, and every
//     message is checked to arrive exactly once.
//   - broker: send frames straight over one WebSocket to a broker as a
//     member; latency is the broker's ack (its durable accept).
//   - sessions: one daemon on its embedded broker with many agent
//     sessions, DMs from each session to the next; latency to the message
//     event, and the daemon's memory.
//   - startup: exec of the daemon to its first answer on the socket, with
//     rows waiting in its outbox, and its resident memory.
//   - backlog: alice queues --count DMs to bob against a broker's rate
//     limit (ours, or in its legacy mode upstream's bucket); the refused
//     attempts per delivered message, alice's daemon CPU-seconds per
//     minute, and every message checked to arrive once and in order.
//
// Open loop when a rate is given: message i is due at start + i/rate and its
// latency counts from then, so falling behind shows in the figures.
package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Modes.
const (
	ModeAccept = "accept"
	ModeE2E    = "e2e"
	ModeBroker = "broker"
)

// DrainTimeout bounds the wait for messages still on their way once the
// last one was sent (e2e): what has not arrived by then is lost.
const DrainTimeout = 30 * time.Second

// Options configure a run.
type Options struct {
	Mode     string
	Clients  int           // concurrent senders
	Count    int           // messages to send (0: Duration decides)
	Duration time.Duration // how long to send when Count is 0
	Rate     int           // messages per second offered; 0: as fast as the clients go
	Size     int           // message body bytes
	// Connections is how many WebSockets a broker run spreads its clients
	// over (0: one).
	Connections int
	// Pending is how many rows a startup run puts in the outbox first.
	Pending int
	// FsyncMode is the [outbox] fsync_mode of the daemons a self-contained
	// run starts ("": their default, strict).
	FsyncMode string
	// Sessions is how many agent sessions a sessions run registers (0:
	// DefaultSessions).
	Sessions int
	// RateLimit and RateWindow are the broker's limit in a backlog run;
	// LegacyBroker runs that broker in its legacy mode (upstream's bucket
	// and strings, no retry-after) and the daemons with [features]
	// legacy_broker; Concurrent, set, has it handle a connection's frames
	// concurrently, as upstream's does (`broker up --legacy-concurrent`).
	RateLimit    int
	RateWindow   time.Duration
	LegacyBroker bool
	Concurrent   time.Duration
	// ProfileDir, when set, has each process a self-contained run starts
	// write its CPU profile there (<broker|alice|bob|…>.pprof).
	ProfileDir string
	// Progress, if set, is called about once a second while sending.
	Progress func(Progress)
}

// Progress is the state of a run so far.
type Progress struct {
	Elapsed   time.Duration
	Done      int     // messages answered (or arrived, e2e)
	Rate      float64 // of the last second
	LatencyMs Percentiles
	Errors    int
}

// Percentiles of latency, in milliseconds.
type Percentiles struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

// Report is the outcome of a run.
type Report struct {
	Mode       string         `json:"mode"`
	Clients    int            `json:"clients"`
	Rate       int            `json:"rate,omitempty"`
	Size       int            `json:"size"`
	Sent       int            `json:"sent"`
	Delivered  int            `json:"delivered"` // answered, or arrived (e2e)
	ElapsedS   float64        `json:"elapsed_s"`
	Throughput float64        `json:"throughput"` // delivered per second
	LatencyMs  Percentiles    `json:"latency_ms"`
	Errors     map[string]int `json:"errors"`
	Lost       int            `json:"lost"`
	Duplicates int            `json:"duplicates"`
	Pending    int            `json:"pending,omitempty"`  // startup: rows waiting in the outbox
	RSSMB      float64        `json:"rss_mb,omitempty"`   // startup: largest resident memory once serving; sessions: the daemon's after the run
	Sessions   int            `json:"sessions,omitempty"` // sessions: how many were registered
	// CPUMsPerMsg (self-contained runs) is the CPU time each process used
	// during the run per delivered message, in ms: "broker", "alice",
	// "bob", "client" (this process) and their "total". Steadier than the
	// latencies on a shared machine.
	CPUMsPerMsg map[string]float64 `json:"cpu_ms_per_msg,omitempty"`
	// Backlog runs: the broker's rate-limit refusals alice's daemon
	// counted, and its CPU time per minute while it drained the backlog.
	Refused          int     `json:"refused,omitempty"`
	DaemonCPUSPerMin float64 `json:"daemon_cpu_s_per_min,omitempty"`
}

// sender sends message i with client_message_id id and body; it returns
// an error code ("" on success) once the message is accepted, or err when
// it could not be sent at all.
type sender interface {
	send(ctx context.Context, id, body string) (code string, err error)
}

// arrivals, for e2e, records when each id reached the receiver.
type arrivals interface {
	arrived(id string) (time.Time, bool)
	duplicates() int
}

// run sends opts.Count messages (or for opts.Duration) through s with
// opts.Clients workers and returns the report; with recv set, latency is
// measured at the receiver and lost messages are counted.
func run(ctx context.Context, opts Options, runID string, s sender, recv arrivals) (*Report, error) {
	if opts.Clients <= 0 {
		return nil, errors.New("bench: clients must be at least 1")
	}
	if opts.Count <= 0 && opts.Duration <= 0 {
		return nil, errors.New("bench: give a count or a duration")
	}
	body := make([]byte, max(opts.Size, 1))
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	r := &recorder{errors: map[string]int{}}
	start := time.Now()
	sendCtx := ctx
	if opts.Count <= 0 {
		var cancel context.CancelFunc
		sendCtx, cancel = context.WithDeadline(ctx, start.Add(opts.Duration))
		defer cancel()
	}
	var next, attempted atomic.Int64
	var wg sync.WaitGroup
	sentAt := newSentTimes()
	stopProgress := r.report(opts.Progress, start)
	for range opts.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if opts.Count > 0 && i >= opts.Count || sendCtx.Err() != nil {
					return
				}
				due := time.Now()
				if opts.Rate > 0 {
					due = start.Add(time.Duration(i) * time.Second / time.Duration(opts.Rate))
					if wait := time.Until(due); wait > 0 {
						t := time.NewTimer(wait)
						select {
						case <-t.C:
						case <-sendCtx.Done():
							t.Stop()
							return
						}
					}
				}
				id := fmt.Sprintf("bench-%s-%d", runID, i)
				attempted.Add(1)
				code, err := s.send(ctx, id, string(body))
				switch {
				case err != nil:
					r.fail("send_failed")
				case code != "":
					r.fail(code)
				case recv == nil:
					r.done(time.Since(due))
				default:
					sentAt.put(id, due) // on its way to the receiver
					r.sent()
				}
			}
		}()
	}
	wg.Wait()
	stopProgress()
	rep := &Report{Mode: opts.Mode, Clients: opts.Clients, Rate: opts.Rate, Size: opts.Size, Errors: r.errors}
	if recv != nil {
		waitArrivals(ctx, sentAt, recv, r)
	}
	elapsed := time.Since(start)
	rep.Sent = int(attempted.Load())
	rep.Delivered = len(r.latencies)
	rep.ElapsedS = elapsed.Seconds()
	rep.Throughput = float64(rep.Delivered) / elapsed.Seconds()
	rep.LatencyMs = percentiles(r.latencies)
	if recv != nil {
		rep.Lost = sentAt.len() - rep.Delivered
		rep.Duplicates = recv.duplicates()
	}
	return rep, nil
}

// waitArrivals records each sent id's latency at the receiver, waiting up
// to DrainTimeout after the last send for those still on their way.
func waitArrivals(ctx context.Context, sentAt *sentTimes, recv arrivals, r *recorder) {
	deadline := time.Now().Add(DrainTimeout)
	pending := sentAt.snapshot()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for len(pending) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		for id, due := range pending {
			if at, ok := recv.arrived(id); ok {
				r.done(max(at.Sub(due), 0))
				delete(pending, id)
			}
		}
		if len(pending) > 0 {
			<-tick.C // poll interval: arrivals are re-checked
		}
	}
}

// recorder collects outcomes from the workers.
type recorder struct {
	mu        sync.Mutex
	latencies []time.Duration
	errors    map[string]int
	failures  int
	inflight  int // sent, not yet arrived (e2e)
}

func (r *recorder) done(d time.Duration) {
	r.mu.Lock()
	r.latencies = append(r.latencies, d)
	r.mu.Unlock()
}

func (r *recorder) sent() {
	r.mu.Lock()
	r.inflight++
	r.mu.Unlock()
}

func (r *recorder) fail(code string) {
	r.mu.Lock()
	r.errors[code]++
	r.failures++
	r.mu.Unlock()
}

// report calls progress about once a second until the returned stop.
func (r *recorder) report(progress func(Progress), start time.Time) (stop func()) {
	if progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		last := 0
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			r.mu.Lock()
			n := max(len(r.latencies), r.inflight)
			p := Progress{Elapsed: time.Since(start), Done: n, Rate: float64(n - last),
				LatencyMs: percentiles(r.latencies), Errors: r.failures}
			r.mu.Unlock()
			last = n
			progress(p)
		}
	}()
	return func() { close(done); <-finished }
}

// percentiles of ds (which it sorts a copy of).
func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return float64(s[min(max(i, 0), len(s)-1)].Microseconds()) / 1000
	}
	return Percentiles{P50: at(0.5), P90: at(0.9), P99: at(0.99), P999: at(0.999), Max: at(1)}
}

// sentTimes maps each sent id to when it was due.
type sentTimes struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func newSentTimes() *sentTimes { return &sentTimes{m: map[string]time.Time{}} }

func (s *sentTimes) put(id string, at time.Time) {
	s.mu.Lock()
	s.m[id] = at
	s.mu.Unlock()
}

func (s *sentTimes) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func (s *sentTimes) snapshot() map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]time.Time, len(s.m))
	for k, v := range s.m {
		out[k] = v
	}
	return out
}
