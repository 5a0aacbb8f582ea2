package messages

// The agent-hook outbox (spec/hook-outbox.md): what the hooks worker asks
// the store to do with hooks.db, and what GET /v1/health and the session
// list say about it.

// HookRow is one hook outbox row as the worker handles it.
type HookRow struct {
	ID        int64
	SessionID string
	Agent     string
	EventType string
	Payload   []byte
	CreatedAt int64 // ms: the FIFO order key, with ID
	Attempts  int   // attempt_count: failed attempts so far
	// PresenceFollows says that a later row of the session that sets its
	// presence waits in the worker's queue behind this one: the handler
	// may leave the presence to it (presence updates coalesce; the row is
	// handled all the same).
	PresenceFollows bool
}

// ClaimHooks asks the store for up to Limit due rows of hooks.db, oldest
// first, each claimed with a conditional update of its lock (a row whose
// lock is younger than Cutoff is someone else's). A row is due when its
// next_attempt_at has come, and is held back while an older row of its
// session waits for a retry (per-session FIFO). Sent by the hooks actor;
// the reply is *HooksClaimed.
type ClaimHooks struct {
	Now    int64 // ms
	Cutoff int64 // ms: locks taken before it are stale and may be taken over
	Limit  int
	// Exclude are sessions not to claim for: their queue is full, or a
	// worker that died holds a lock on one of their rows.
	Exclude []string
	// Recover asks, as a worker's first claim, for the sessions whose rows
	// carry a lock younger than Cutoff: a worker before this one took it
	// and may still be handling the row.
	Recover bool
}

// HooksClaimed is the reply to *ClaimHooks: the rows claimed, oldest
// first; with Recover, Locked maps each session with a fresh lock to the
// newest such lock (ms).
type HooksClaimed struct {
	Rows   []HookRow
	Locked map[string]int64
	Err    error
}

// Failure returns the store's error, nil on success.
func (r *HooksClaimed) Failure() error { return r.Err }

// What became of a claimed row (HookOutcome.Kind). Every kind but
// HookRetry and HookReleased marks the row delivered, never to be
// handled again; the outcome column keeps which.
const (
	HookDelivered = "delivered" // handled
	HookFailed    = "failed"    // a non-retryable failure or a payload that is not JSON: kept with the error
	HookCoalesced = "coalesced" // a bursty row a later one of its run superseded (a note says which)
	HookEvicted   = "evicted"   // a bursty row dropped from a full queue (a note says so)
	HookRetry     = "retry"     // a retryable failure: attempt_count+1, last_error, next_attempt_at, lock released
	HookReleased  = "released"  // handed back unhandled: lock released, no attempt counted
)

// HookOutcome is what became of one claimed row.
type HookOutcome struct {
	ID        int64
	Kind      string
	EventType string // the row's, for the worker's counts (not written)
	// Error is the failure (HookFailed, HookRetry) or the note of a row
	// coalesced or evicted.
	Error string
	// NextAttempt is when a HookRetry row is due again (ms).
	NextAttempt int64
}

// FinishHooks records outcomes of claimed rows. Sent by the hooks actor;
// the reply is *HooksFinished.
type FinishHooks struct {
	Now      int64 // ms
	Outcomes []HookOutcome
}

// HooksFinished is the reply to *FinishHooks: how many rows changed.
type HooksFinished struct {
	Rows int64
	Err  error
}

// Failure returns the store's error, nil on success.
func (r *HooksFinished) Failure() error { return r.Err }

// HookStats asks the store for the state of hooks.db. The reply is
// *HookCounts.
type HookStats struct {
	Now int64 // ms
}

// HookCounts is the reply to *HookStats.
type HookCounts struct {
	Backlog         int    // rows not delivered
	OldestCreatedAt int64  // ms, of the oldest of them (0: none)
	Retrying        int    // rows not delivered that failed at least once
	Failed          int    // rows given up on (kept until pruned)
	LastError       string // the newest failure among the rows not delivered
	Err             error
}

// Failure returns the store's error, nil on success.
func (r *HookCounts) Failure() error { return r.Err }

// PruneHooks deletes up to Limit rows delivered before Before (ms). Sent
// by the hooks actor; the reply is *HooksPruned.
type PruneHooks struct {
	Before int64
	Limit  int
}

// HooksPruned is the reply to *PruneHooks.
type HooksPruned struct {
	Rows int64
	Err  error
}

// Failure returns the store's error, nil on success.
func (r *HooksPruned) Failure() error { return r.Err }

// HookWake wakes the hooks worker before its next tick: a receiver poked
// the daemon, or the daemon is ready for the worker to begin.
type HookWake struct{}

// HookHealth is the hooks part of GET /v1/health (and `daemon status`).
type HookHealth struct {
	Backlog int `json:"backlog"` // rows not delivered yet
	// OldestUndeliveredAgeMs is how long the oldest of them has waited:
	// a large one means the worker is failing (or stopped).
	OldestUndeliveredAgeMs int64 `json:"oldest_undelivered_age_ms"`
	Retrying               int   `json:"retrying"` // rows waiting for a retry after a failure
	Failed                 int   `json:"failed"`   // rows given up on (non-retryable, corrupt) in the last 7 days
	// ReceiverWriteErrors counts the receivers that could not write
	// hooks.db (hooks.errors); LastReceiverError is the newest line.
	ReceiverWriteErrors int    `json:"receiver_write_errors"`
	LastReceiverError   string `json:"last_receiver_error,omitempty"`
	LastError           string `json:"last_error,omitempty"` // the newest failure of a row not delivered
}

// Live states of an agent session (AgentState.State).
const (
	AgentIdle           = "idle"
	AgentWorking        = "working"
	AgentNeedsAttention = "needs_attention"
)

// AgentState is an agent session's live state as its hooks tell it.
type AgentState struct {
	Agent string `json:"agent"`
	State string `json:"state"` // idle | working | needs_attention
	// Doing is what it is at: the tool it runs ("Bash: go test ./..."),
	// or the prompt it works on, or what it needs attention for.
	Doing          string `json:"doing,omitempty"`
	Prompt         string `json:"prompt,omitempty"` // the first line of the last prompt
	LastEvent      string `json:"last_event"`       // the internal event type
	Since          int64  `json:"since"`            // ms: the state began
	LastActivityAt int64  `json:"last_activity_at"` // ms: the last hook of the session
}
