package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/messages/backoff"
	"github.com/claudemesh/claudemesh-go/messages/hookevent"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// The hooks worker's tunables (spec/hook-outbox.md "Worker").
const (
	DefaultHookTick       = time.Second
	DefaultHookBatch      = 25
	DefaultHookLockCutoff = 30 * time.Second
	// DefaultHookQueue bounds each session's queue between the claim and
	// the handler (spec "Backpressure").
	DefaultHookQueue = 128
	// DefaultHookTimeout bounds one handler call; a handler that takes
	// longer has failed, retryably.
	DefaultHookTimeout = 10 * time.Second
	// Delivered rows older than persistence.HooksRetention are deleted at
	// the worker's start and every RetentionEvery, RetentionBatch rows a
	// pass (store_retention.go's timings).
	// hookBackoffCap is the longest wait before a retry.
	hookBackoffCap = 60 * time.Second
)

// HookHandler does what a hook event means (actors/daemon implements it).
// It is called on a goroutine of its own, one row of a session at a time,
// and may block (a registration, the broker). It must tolerate a row it
// has handled before: a lock can expire while it runs.
type HookHandler interface {
	HandleHook(ctx context.Context, row *messages.HookRow, p *hookevent.Payload) error
}

// ErrHookNonRetryable marks a handler failure that no retry would mend:
// the row is marked delivered with the error at once. An *messages.Error
// with a 4xx status (but 408 and 429) is non-retryable too.
var ErrHookNonRetryable = errors.New("non-retryable")

// HooksOptions configure the hooks worker; the zero values are the spec's.
type HooksOptions struct {
	Handler HookHandler
	// Clock is the worker's time (nil: time.Now); tests move it.
	Clock      func() time.Time
	Tick       time.Duration
	Batch      int
	LockCutoff time.Duration
	Queue      int
	Timeout    time.Duration
	// Retention is how long delivered rows are kept (0:
	// persistence.HooksRetention).
	Retention time.Duration
	Metrics   *HookMetrics // nil: not counted
	Log       *slog.Logger
}

func (o *HooksOptions) defaults() {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	o.Tick = cmp.Or(o.Tick, DefaultHookTick)
	o.LockCutoff = cmp.Or(o.LockCutoff, DefaultHookLockCutoff)
	o.Timeout = cmp.Or(o.Timeout, DefaultHookTimeout)
	o.Retention = cmp.Or(o.Retention, persistence.HooksRetention)
	if o.Batch <= 0 {
		o.Batch = DefaultHookBatch
	}
	if o.Queue <= 0 {
		o.Queue = DefaultHookQueue
	}
}

// Hooks is the hook outbox's worker (the daemon's `hooks` actor). Every
// tick, when poked (messages.HookWake), and at once again while claims
// come back full, it asks the store to claim up to Batch due rows, oldest
// first; the rows go to their session's queue (hookQueue: coalescing,
// eviction), and each session's rows are handled one at a time, in order,
// sessions concurrently. Outcomes go back to the store in batches, one
// FinishHooks in flight: delivered; a retryable failure retried after 1,
// 2, 4 … 60 s, the session's later rows handed back meanwhile; a
// non-retryable failure or a payload that is not JSON marked delivered
// with the error. Delivered rows older than the retention are pruned.
//
// It begins at its first HookWake: the daemon sends one once it serves,
// so that no handler runs before the registry and the IPC server exist.
type Hooks struct {
	opts  HooksOptions
	store *actor.PID
	log   *slog.Logger

	parked    bool
	claiming  bool // a ClaimHooks is in flight
	again     bool // claim once more when it answers
	recovered bool // the first claim (Recover) has answered
	// quarantine holds sessions whose rows a previous worker locked, until
	// those locks are stale (ms).
	quarantine map[string]int64
	sessions   map[string]*hookSession
	inHand     map[int64]bool // rows queued or running
	outcomes   []messages.HookOutcome
	finishing  bool // a FinishHooks is in flight
	starved    bool // a claim left out a session whose queue was full
	pruning    bool
}

// hookSession is one session's rows in the worker.
type hookSession struct {
	q       hookQueue
	running bool
	// held is the row of the session waiting for its retry: the session's
	// later rows are handed back until it is claimed again.
	held *messages.HookRow
}

// hookTick is the worker's timer; hookHandled a handler's result;
// hookPrune the pruning timer.
type (
	hookTick    struct{}
	hookPrune   struct{}
	hookHandled struct {
		row  messages.HookRow
		err  error
		took time.Duration
	}
)

// NewHooks returns the hooks actor's producer.
func NewHooks(store *actor.PID, o HooksOptions) actor.Producer {
	o.defaults()
	return func() actor.Actor {
		return &Hooks{opts: o, store: store, log: o.Log.With("actor", "hooks"), parked: true,
			quarantine: map[string]int64{}, sessions: map[string]*hookSession{}, inHand: map[int64]bool{}}
	}
}

// Receive handles one message.
func (h *Hooks) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	case *messages.HookWake:
		h.wake(ctx)
	case *hookTick:
		workers.SendLater(ctx, h.opts.Tick, &hookTick{})
		h.claim(ctx)
	case *messages.HooksClaimed:
		h.claimed(ctx, msg)
	case *hookHandled:
		h.handled(ctx, msg)
	case *messages.HooksFinished:
		h.finished(ctx, msg)
	case *hookPrune:
		h.prune(ctx)
	case *messages.HooksPruned:
		h.pruned(ctx, msg)
	default:
		h.log.Warn("unhandled message", "type", fmt.Sprintf("%T", msg))
	}
}

func (h *Hooks) now() int64 { return h.opts.Clock().UnixMilli() }

// wake claims at once; the first wake starts the ticks and the pruning.
func (h *Hooks) wake(ctx actor.Context) {
	if h.parked {
		h.parked = false
		workers.SendLater(ctx, h.opts.Tick, &hookTick{})
		h.prune(ctx)
	}
	h.claim(ctx)
}

// claim asks the store for due rows, leaving out the sessions whose queue
// is full and those a previous worker may still be handling.
func (h *Hooks) claim(ctx actor.Context) {
	if h.parked {
		return
	}
	if h.claiming {
		h.again = true
		return
	}
	now := h.now()
	var exclude []string
	for s, until := range h.quarantine {
		if until <= now {
			delete(h.quarantine, s)
			continue
		}
		exclude = append(exclude, s)
	}
	h.starved = false
	for id, s := range h.sessions {
		if s.q.len() >= h.opts.Queue {
			exclude, h.starved = append(exclude, id), true
		}
	}
	h.claiming = true
	ctx.Request(h.store, &messages.ClaimHooks{Now: now, Cutoff: now - h.opts.LockCutoff.Milliseconds(), Limit: h.opts.Batch,
		Exclude: exclude, Recover: !h.recovered})
}

// claimed queues the rows the store claimed and starts their sessions.
func (h *Hooks) claimed(ctx actor.Context, msg *messages.HooksClaimed) {
	h.claiming = false
	if msg.Err != nil {
		h.log.Warn("hook_claim_failed", "err", msg.Err)
		return // the next tick tries again
	}
	if !h.recovered && msg.Locked != nil {
		h.recovered = true
		for s, at := range msg.Locked {
			until := at + h.opts.LockCutoff.Milliseconds() + 1 // stale once older than the cutoff
			h.quarantine[s] = until
			h.log.Info("hook_session_quarantined", "session", s, "until_ms", until)
		}
	}
	full := map[string]bool{}
	for _, r := range msg.Rows {
		h.take(r, full)
	}
	for id := range h.sessions {
		h.start(ctx, id)
	}
	h.finish(ctx)
	if len(msg.Rows) >= h.opts.Batch || h.again {
		h.again = false
		h.claim(ctx)
	}
}

// take puts a claimed row in its session's queue, or hands it back: the
// session waits for an older row's retry, or its queue is full of critical
// rows (full: the sessions found so in this claim, whose later rows of the
// claim go back too, to keep their order).
func (h *Hooks) take(r messages.HookRow, full map[string]bool) {
	if h.inHand[r.ID] {
		return // a lock of ours that went stale while the row waited: taken again, still queued
	}
	s := h.sessions[r.SessionID]
	if s == nil {
		s = &hookSession{}
		h.sessions[r.SessionID] = s
	}
	if s.held != nil && r.ID == s.held.ID {
		s.held = nil
	}
	if s.held != nil || full[r.SessionID] {
		h.outcome(messages.HookOutcome{ID: r.ID, Kind: messages.HookReleased, EventType: r.EventType})
		return
	}
	dropped, queued := s.q.push(r, h.opts.Queue)
	for _, o := range dropped {
		delete(h.inHand, o.ID)
		h.outcome(o)
	}
	switch {
	case !queued:
		full[r.SessionID] = true
		h.outcome(messages.HookOutcome{ID: r.ID, Kind: messages.HookReleased, EventType: r.EventType})
	case !slices.ContainsFunc(dropped, func(o messages.HookOutcome) bool { return o.ID == r.ID }):
		h.inHand[r.ID] = true
	}
}

// start hands the session's next row to the handler, unless one runs. A
// row whose payload is not JSON, or whose type has no handler, is marked
// delivered with the error at once.
func (h *Hooks) start(ctx actor.Context, id string) {
	s := h.sessions[id]
	for s != nil && !s.running {
		r, ok := s.q.pop()
		if !ok {
			if s.held == nil {
				delete(h.sessions, id)
			}
			return
		}
		p, err := hookevent.Decode(r.Payload)
		if err == nil && !hookevent.Handled(r.EventType) {
			err = fmt.Errorf("no handler for event type %q", r.EventType)
		}
		if err != nil {
			delete(h.inHand, r.ID)
			h.outcome(messages.HookOutcome{ID: r.ID, Kind: messages.HookFailed, EventType: r.EventType, Error: err.Error()})
			continue
		}
		s.running = true
		r.PresenceFollows = s.q.presenceQueued()
		root, self, handler, timeout := ctx.ActorSystem().Root, ctx.Self(), h.opts.Handler, h.opts.Timeout
		go func() {
			hctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			start := time.Now()
			err := handleSafely(hctx, handler, &r, p)
			root.Send(self, &hookHandled{row: r, err: err, took: time.Since(start)})
		}()
	}
}

// handleSafely runs the handler, turning a panic into a retryable error.
func handleSafely(ctx context.Context, h HookHandler, r *messages.HookRow, p *hookevent.Payload) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("hook handler panic: %v", v)
		}
	}()
	return h.HandleHook(ctx, r, p)
}

// handled records a handler's result and starts the session's next row.
// A retryable failure holds the session: the row is due again after its
// backoff, and the session's queued rows are handed back until then.
func (h *Hooks) handled(ctx actor.Context, msg *hookHandled) {
	r := msg.row
	delete(h.inHand, r.ID)
	h.opts.Metrics.handled(r.EventType, msg.took)
	s := h.sessions[r.SessionID]
	if s != nil {
		s.running = false
	}
	switch {
	case msg.err == nil:
		h.outcome(messages.HookOutcome{ID: r.ID, Kind: messages.HookDelivered, EventType: r.EventType})
	case !hookRetryable(msg.err):
		h.log.Warn("hook_failed", "id", r.ID, "session", r.SessionID, "event_type", r.EventType, "err", msg.err)
		h.outcome(messages.HookOutcome{ID: r.ID, Kind: messages.HookFailed, EventType: r.EventType, Error: msg.err.Error()})
	default:
		next := h.now() + HookBackoff(r.Attempts+1).Milliseconds()
		h.log.Info("hook_retry", "id", r.ID, "session", r.SessionID, "event_type", r.EventType, "attempt", r.Attempts+1,
			"next_attempt_at", next, "err", msg.err)
		h.outcome(messages.HookOutcome{ID: r.ID, Kind: messages.HookRetry, EventType: r.EventType, Error: msg.err.Error(),
			NextAttempt: next})
		if s != nil {
			held := r
			s.held = &held
			for _, later := range s.q.drain() {
				delete(h.inHand, later.ID)
				h.outcome(messages.HookOutcome{ID: later.ID, Kind: messages.HookReleased, EventType: later.EventType})
			}
		}
	}
	starved := h.starved && s != nil && s.q.len() < h.opts.Queue
	h.start(ctx, r.SessionID)
	h.finish(ctx)
	if starved {
		h.claim(ctx)
	}
}

// HookBackoff is the wait before the attempt-th retry: 1 s, 2 s, 4 s,
// 8 s, 16 s, 32 s, then 60 s.
func HookBackoff(attempt int) time.Duration { return hookRetry.Delay(attempt, nil) }

// hookRetry is HookBackoff's schedule.
var hookRetry = backoff.Schedule{First: time.Second, Max: hookBackoffCap}

// hookRetryable reports whether a handler failure may mend: anything but
// ErrHookNonRetryable and a 4xx answer other than 408 and 429.
func hookRetryable(err error) bool {
	if errors.Is(err, ErrHookNonRetryable) {
		return false
	}
	var me *messages.Error
	if errors.As(err, &me) && me.Status >= 400 && me.Status < 500 {
		return me.Status == http.StatusRequestTimeout || me.Status == http.StatusTooManyRequests
	}
	return true
}

func (h *Hooks) outcome(o messages.HookOutcome) {
	h.opts.Metrics.outcome(o.EventType, o.Kind)
	h.outcomes = append(h.outcomes, o)
}

// finish sends the outcomes gathered so far, unless a FinishHooks is in
// flight (its answer sends the next).
func (h *Hooks) finish(ctx actor.Context) {
	if h.finishing || len(h.outcomes) == 0 {
		return
	}
	h.finishing = true
	ctx.Request(h.store, &messages.FinishHooks{Now: h.now(), Outcomes: h.outcomes})
	h.outcomes = nil
}

func (h *Hooks) finished(ctx actor.Context, msg *messages.HooksFinished) {
	h.finishing = false
	if msg.Err != nil {
		// The rows stay locked until the cutoff, then are claimed and
		// handled again: the handlers tolerate it.
		h.log.Warn("hook_finish_failed", "err", msg.Err)
	}
	h.finish(ctx)
}

// prune deletes a pass of the delivered rows older than the retention.
func (h *Hooks) prune(ctx actor.Context) {
	if h.pruning {
		return
	}
	h.pruning = true
	ctx.Request(h.store, &messages.PruneHooks{Before: h.now() - h.opts.Retention.Milliseconds(), Limit: RetentionBatch})
}

// pruned schedules the next pass: at once-ish when this one hit its limit.
func (h *Hooks) pruned(ctx actor.Context, msg *messages.HooksPruned) {
	h.pruning = false
	next := RetentionEvery
	switch {
	case msg.Err != nil:
		h.log.Warn("hook_prune_failed", "err", msg.Err)
	case msg.Rows >= RetentionBatch:
		next = RetentionCatchUp
	}
	if msg.Rows > 0 {
		h.log.Info("hook_rows_pruned", "rows", msg.Rows)
	}
	workers.SendLater(ctx, next, &hookPrune{})
}
