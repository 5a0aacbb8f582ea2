package daemon

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/claudemesh/claudemesh-go/actors"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/messages/hookevent"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/persistence/hookoutbox"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
	"github.com/claudemesh/claudemesh-go/transport/ipc/metrics"
	"github.com/claudemesh/claudemesh-go/transport/ipcserver"
)

// hookStatsTimeout bounds how long /v1/health and a metrics scrape wait
// for the store's counts of hooks.db.
const hookStatsTimeout = 2 * time.Second

// hooks is the daemon's side of the agent-hook outbox (spec/hook-outbox.md):
// hooks.db, opened before the actor tree and given to the store; the wake
// socket the receivers poke; and the handler the hooks worker calls for
// each row, which acts through the daemon's own IPC surface — it
// registers a session that is not registered yet (POST
// /v1/sessions/register) and sets that session's presence (POST
// /v1/profile with the session's token: its route, its key) — and keeps
// each session's live state for GET /v1/sessions and `claudemesh peers`.
//
// Decisions where the spec is silent: tool_use and tool_done update the
// live state only and are not published (they come at agent speed, and the
// event log, bounded by count, would lose the messages a resuming stream
// needs); a SubagentStop does not make the session idle; a session a hook
// registers is tied to the agent's process (the hook's parent) and joins
// the mesh the agent's environment names (CLAUDEMESH_MESH), else the one a
// plain send picks (sessionsOf); its first presence waits for its broker
// connection, dialled at the registration, for up to ipc.LinkWait rather
// than failing into the row's retry a second later.
type hooks struct {
	d      *Daemon
	db     *persistence.Hooks
	client *ipc.Client // the daemon's socket, as no session
	wake   *net.UnixConn

	mu   sync.Mutex
	live map[string]*messages.AgentState // by session id

	statsMu sync.Mutex
	stats   *messages.HookHealth // the last counts, for a scrape's gauges
	statsAt time.Time
}

// maxLive bounds the live states kept; past it the oldest are dropped.
const maxLive = 4096

// openHooks opens hooks.db (a corrupt one is set aside and recreated).
func (d *Daemon) openHooks() error {
	db, err := persistence.OpenHooks(context.Background(), d.opts.Paths.HooksDB(), d.log)
	if err != nil {
		return err
	}
	d.hooks = &hooks{d: d, db: db, client: ipc.NewClient(d.opts.Paths.Socket()), live: map[string]*messages.AgentState{}}
	return nil
}

// worker is the hooks actor's configuration, its series registered with
// the daemon's.
func (h *hooks) worker(series *metrics.Daemon) *actors.HooksOptions {
	h.registerGauges(series.Registry)
	opts := &actors.HooksOptions{Handler: h, Metrics: actors.NewHookMetrics(series.Registry)}
	if f := h.d.opts.Faults; f != nil {
		opts.LockCutoff = f.HookLockCutoff
	}
	return opts
}

// serve listens on hooks.wake and wakes the worker at once and at every
// datagram a receiver sends. Without the socket the worker still looks
// every second.
func (h *hooks) serve() {
	path := h.d.opts.Paths.HookWake()
	tree := h.d.tree
	wake := func() { tree.System.Root.Send(tree.Hooks, &messages.HookWake{}) }
	defer wake()
	os.Remove(path) // a crashed daemon's: the directory lock says no other daemon runs
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err == nil {
		err = os.Chmod(path, 0o600)
	}
	if err != nil {
		h.d.log.Warn("hook_wake_socket_unavailable", "path", path, "err", err, "next", "the hooks worker looks every second")
		if conn != nil {
			conn.Close()
		}
		return
	}
	h.wake = conn
	go func() {
		var buf [64]byte
		for {
			if _, _, err := conn.ReadFrom(buf[:]); err != nil {
				return // closed
			}
			wake()
		}
	}()
}

// close stops the wake socket and, once the actors are gone, frees the
// rows the worker held (a clean stop need not wait out the lock cutoff at
// the next start) and closes hooks.db.
func (h *hooks) close() {
	if h.wake != nil {
		h.wake.Close()
		os.Remove(h.d.opts.Paths.HookWake())
	}
}

func (h *hooks) closeDB() {
	ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
	defer cancel()
	if n, err := h.db.ReleaseLocks(ctx); err != nil {
		h.d.log.Warn("hook_locks_release_failed", "err", err, "next", "the next start waits out the lock cutoff")
	} else if n > 0 {
		h.d.log.Info("hook_locks_released", "rows", n)
	}
	if err := h.db.Close(); err != nil {
		h.d.log.Warn("close hooks.db", "err", err)
	}
}

// HandleHook implements actors.HookHandler.
func (h *hooks) HandleHook(ctx context.Context, row *messages.HookRow, p *hookevent.Payload) error {
	row = h.continued(row, p) // hooks_sessions.go
	state := h.note(row, p)
	switch row.EventType {
	case hookevent.ToolUse, hookevent.ToolDone:
		return nil // the live state only
	case hookevent.Error:
		h.publish(row, p, state, nil)
		return nil
	case hookevent.SessionEnd:
		return h.endSession(ctx, row, p, state)
	}
	sessions, fresh, err := h.sessionsOf(ctx, row.SessionID, p)
	if err != nil {
		return err
	}
	var profile *messages.SetProfile
	switch row.EventType {
	case hookevent.SessionStart:
		profile = &messages.SetProfile{Status: ptr(messages.AgentIdle)}
	case hookevent.UserPromptSubmit:
		profile = &messages.SetProfile{Status: ptr(messages.AgentWorking)}
	case hookevent.AgentStop:
		if !p.Subagent {
			profile = &messages.SetProfile{Status: ptr(messages.AgentIdle)}
			if p.Message != "" {
				profile.Summary = &p.Message
			}
		}
	}
	if profile != nil && !row.PresenceFollows { // a later row sets it: presence updates coalesce
		for _, s := range sessions {
			if err := h.setPresence(ctx, row.SessionID, s, profile, fresh); err != nil {
				return fmt.Errorf("set the presence of session %s on %s: %w", row.SessionID, s.Mesh, err)
			}
		}
	}
	h.publish(row, p, state, sessions)
	if f := h.d.opts.Faults; f != nil && f.HookStall == row.EventType {
		h.d.log.Warn("hook_stall_fault", "id", row.ID, "event_type", row.EventType)
		select {} // a worker that dies mid-row: the test kills the daemon now
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// setPresence sets profile on registration s of session id: once its broker
// connection is up when it was registered just now (fresh). Should s's
// token have stopped working meanwhile, because the agent's MCP server
// registered the same id again (Claude Code starts it beside the
// SessionStart hook), it is set on the registration that now holds the id
// on s's mesh.
func (h *hooks) setPresence(ctx context.Context, id string, s *ipcserver.Session, profile *messages.SetProfile, fresh bool) error {
	for tries := 1; ; tries++ {
		set := func() (*messages.ProfileApplied, error) { return h.client.AsSession(s.Token).SetProfile(ctx, profile) }
		var err error
		if fresh { // registered just now: its broker connection is being dialled
			_, err = ipc.WhenLinked(ctx, set)
		} else {
			_, err = set()
		}
		var me *messages.Error
		if tries == maxPresenceTries || !errors.As(err, &me) || me.Code != messages.CodeSessionUnknown {
			return err
		}
		now := h.d.sessions.withID(id)
		i := slices.IndexFunc(now, func(o *ipcserver.Session) bool { return o.Mesh == s.Mesh && o.Token != s.Token })
		if i < 0 {
			return err
		}
		s, fresh = now[i], true
	}
}

// maxPresenceTries bounds the registrations setPresence follows the
// session id to.
const maxPresenceTries = 3

// sessionsOf is every registration of the session id (one per mesh it
// uses), registering it first when it has none (fresh): with the mesh and
// display name its environment gave, else the daemon's default mesh (the
// one an MCP server or a plain send picks: messages.DefaultMesh), else its
// first, and a name made of its working directory, tied to the agent's
// process.
func (h *hooks) sessionsOf(ctx context.Context, id string, p *hookevent.Payload) (_ []*ipcserver.Session, fresh bool, _ error) {
	if got := h.d.sessions.withID(id); len(got) > 0 {
		return got, false, nil
	}
	mesh := p.Mesh
	if mesh == "" {
		members := h.d.server.Memberships()
		if len(members) == 0 {
			return nil, false, fmt.Errorf("register session %s: the daemon serves no mesh: %w", id, actors.ErrHookNonRetryable)
		}
		mesh = cmp.Or(messages.DefaultMesh(ipcserver.MembershipInfos(members)), members[0].Info.Mesh)
	}
	var tok [32]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, false, err
	}
	reg := &messages.RegisterSession{Token: hex.EncodeToString(tok[:]), SessionID: id, Mesh: mesh,
		DisplayName: cmp.Or(p.DisplayName, hookDisplayName(p.Cwd, id)), PID: p.PID, Cwd: p.Cwd}
	if _, err := h.client.RegisterSession(ctx, reg); err != nil {
		return nil, false, fmt.Errorf("register session %s: %w", id, err)
	}
	h.d.log.Info("hook_session_registered", "session", id, "mesh", mesh, "pid", p.PID)
	if got := h.d.sessions.withID(id); len(got) > 0 {
		return got, true, nil
	}
	return nil, false, fmt.Errorf("session %s was registered and is gone again", id)
}

// hookDisplayName is the name of a session a hook registers: its working
// directory's base name and the start of its id.
func hookDisplayName(cwd, id string) string {
	base := messages.SessionNameBase(cwd)
	return base + "-" + id[:min(4, len(id))]
}

// withID lists the registrations of session id, by mesh.
func (s *sessions) withID(id string) []*ipcserver.Session {
	s.byMu.RLock()
	var out []*ipcserver.Session
	for _, sess := range s.byToken {
		if sess.Info.SessionID == id {
			out = append(out, sess)
		}
	}
	s.byMu.RUnlock()
	slices.SortFunc(out, func(a, b *ipcserver.Session) int { return cmp.Compare(a.Mesh, b.Mesh) })
	return out
}

// note updates the session's live state with a row (a row older than the
// state's last event, handled again, changes nothing) and returns a copy.
func (h *hooks) note(row *messages.HookRow, p *hookevent.Payload) messages.AgentState {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.live[row.SessionID]
	if st == nil {
		h.trimLive()
		st = &messages.AgentState{Agent: row.Agent, State: messages.AgentIdle, Since: row.CreatedAt}
		h.live[row.SessionID] = st
	}
	if row.CreatedAt < st.LastActivityAt {
		return *st
	}
	next, doing := st.State, st.Doing
	switch row.EventType {
	case hookevent.SessionStart:
		next, doing = messages.AgentIdle, ""
	case hookevent.UserPromptSubmit:
		next, doing, st.Prompt = messages.AgentWorking, p.Prompt, p.Prompt
	case hookevent.ToolUse:
		next, doing = messages.AgentWorking, toolDoing(p)
	case hookevent.ToolDone:
		next = messages.AgentWorking
	case hookevent.Notification:
		next, doing = messages.AgentNeedsAttention, p.Message
	case hookevent.AgentStop:
		if !p.Subagent {
			next, doing = messages.AgentIdle, ""
		}
	case hookevent.Error:
		doing = strings.TrimSpace(toolDoing(p) + " failed: " + p.Message)
	}
	if next != st.State {
		st.Since = row.CreatedAt
	}
	st.State, st.Doing, st.LastEvent, st.LastActivityAt, st.Agent = next, doing, row.EventType, row.CreatedAt, row.Agent
	return *st
}

func toolDoing(p *hookevent.Payload) string {
	if p.Detail == "" {
		return p.Tool
	}
	return p.Tool + ": " + p.Detail
}

// trimLive drops the states of the sessions idle longest once there are
// maxLive. Under mu.
func (h *hooks) trimLive() {
	if len(h.live) < maxLive {
		return
	}
	ids := make([]string, 0, len(h.live))
	for id := range h.live {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(h.live[a].LastActivityAt, h.live[b].LastActivityAt) })
	for _, id := range ids[:len(ids)/4] {
		delete(h.live, id)
	}
}

// liveState is the live state of session id (nil: no hook seen).
func (h *hooks) liveState(id string) *messages.AgentState {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.live[id]; st != nil {
		c := *st
		return &c
	}
	return nil
}

// agentEvent is the data of an agent_event on /v1/events. Mesh is the
// session's route, so that a stream scoped to the session (or to the
// route) sees it and other sessions' streams do not; an event of a
// session not registered has none, and every stream sees it.
type agentEvent struct {
	Mesh      string `json:"mesh,omitempty"`
	SessionID string `json:"session_id"`
	Agent     string `json:"agent"`
	EventType string `json:"event_type"`
	Event     string `json:"event"` // the agent's own name for it
	State     string `json:"state"`
	Doing     string `json:"doing,omitempty"`
	Message   string `json:"message,omitempty"`
	Kind      string `json:"kind,omitempty"`
	HookID    int64  `json:"hook_id"` // the hook_outbox row: a row handled twice is published twice
	At        string `json:"at"`      // RFC 3339, when the hook ran
}

// publish appends an agent_event to the event log, which the store
// publishes to the streams; nothing waits for it.
func (h *hooks) publish(row *messages.HookRow, p *hookevent.Payload, st messages.AgentState, sessions []*ipcserver.Session) {
	ev := agentEvent{SessionID: row.SessionID, Agent: row.Agent, EventType: row.EventType, Event: p.Event, State: st.State,
		Doing: st.Doing, Message: p.Message, Kind: p.Kind, HookID: row.ID,
		At: time.UnixMilli(row.CreatedAt).UTC().Format(time.RFC3339Nano)}
	if len(sessions) > 0 {
		ev.Mesh = sessions[0].Route
	}
	data, err := json.Marshal(&ev)
	if err != nil {
		return
	}
	tree := h.d.tree
	tree.System.Root.Send(tree.Store, &messages.AppendEvent{Name: "agent_event", Data: data})
}

// Health is the hooks part of GET /v1/health: hooks.db's counts and the
// receivers' write failures.
func (h *hooks) Health() *messages.HookHealth {
	now := time.Now()
	out := &messages.HookHealth{}
	res, err := h.d.tree.System.Root.RequestFuture(h.d.tree.Store, &messages.HookStats{Now: now.UnixMilli()},
		hookStatsTimeout).Result()
	if c, ok := res.(*messages.HookCounts); err == nil && ok && c.Err == nil {
		out.Backlog, out.Retrying, out.Failed, out.LastError = c.Backlog, c.Retrying, c.Failed, c.LastError
		if c.Backlog > 0 {
			out.OldestUndeliveredAgeMs = max(now.UnixMilli()-c.OldestCreatedAt, 0)
		}
	} else {
		out.LastError = "hooks.db counts unavailable: " + cmp.Or(errText(err), errText(failureOf(res)))
	}
	n, last, err := hookoutbox.Failures(h.d.opts.Paths.HookErrors())
	if err != nil {
		last = "read hooks.errors: " + err.Error()
	}
	out.ReceiverWriteErrors, out.LastReceiverError = n, last
	h.statsMu.Lock()
	h.stats, h.statsAt = out, now
	h.statsMu.Unlock()
	return out
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func failureOf(res any) error {
	if f, ok := res.(interface{ Failure() error }); ok && f.Failure() != nil {
		return f.Failure()
	}
	return errors.New("no answer")
}

// recent is the last health at most a second old, else a fresh one: the
// gauges of one scrape share one count.
func (h *hooks) recent() *messages.HookHealth {
	h.statsMu.Lock()
	st, at := h.stats, h.statsAt
	h.statsMu.Unlock()
	if st != nil && time.Since(at) < time.Second {
		return st
	}
	return h.Health()
}

// registerGauges adds the state of hooks.db to the daemon's series, read
// at scrape time.
func (h *hooks) registerGauges(reg prometheus.Registerer) {
	gauge := func(name, help string, v func(*messages.HookHealth) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return v(h.recent()) })
	}
	reg.MustRegister(
		gauge("cm_daemon_hook_backlog", "Hook outbox rows not delivered yet.",
			func(s *messages.HookHealth) float64 { return float64(s.Backlog) }),
		gauge("cm_daemon_hook_oldest_undelivered_seconds", "Age of the oldest hook outbox row not delivered (0: none); a growing one means the worker is failing.",
			func(s *messages.HookHealth) float64 { return float64(s.OldestUndeliveredAgeMs) / 1000 }),
		gauge("cm_daemon_hook_retrying", "Hook outbox rows waiting for a retry after a failure.",
			func(s *messages.HookHealth) float64 { return float64(s.Retrying) }),
		gauge("cm_daemon_hook_failed", "Hook outbox rows given up on (non-retryable failure, payload not JSON), kept 7 days.",
			func(s *messages.HookHealth) float64 { return float64(s.Failed) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cm_daemon_hook_receiver_errors_total",
			Help: "Hook events their receiver (claudemesh hook) did not record: input it could not read, or hooks.db it could not write; the lines of hooks.errors."},
			func() float64 { return float64(h.recent().ReceiverWriteErrors) }),
	)
}
