package actors

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/messages/hookevent"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/persistence/hookoutbox"
)

// openHooksDB opens a fresh hooks.db for a store under test.
func openHooksDB(t *testing.T) *persistence.Hooks {
	t.Helper()
	h, err := persistence.OpenHooks(context.Background(), filepath.Join(t.TempDir(), "hooks.db"), slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// fakeClock is the worker's injected time.
type fakeClock struct{ ms atomic.Int64 }

func newClock(t0 time.Time) *fakeClock {
	c := &fakeClock{}
	c.ms.Store(t0.UnixMilli())
	return c
}

func (c *fakeClock) now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// at is the clock's time plus d, in ms.
func (c *fakeClock) at(d time.Duration) int64 { return c.ms.Load() + d.Milliseconds() }

// recorder is a HookHandler that records what it handled, session by
// session, and fails or blocks as the test says.
type recorder struct {
	mu      sync.Mutex
	handled map[string][]int64
	calls   map[int64]int
	// fail decides a row's result (nil: success).
	fail func(r *messages.HookRow) error
	// block, when it names a row, holds its handler until release closes.
	block   int64
	release chan struct{}
	blocked chan int64
}

func newRecorder() *recorder {
	return &recorder{handled: map[string][]int64{}, calls: map[int64]int{}, release: make(chan struct{}), blocked: make(chan int64, 16)}
}

func (rc *recorder) HandleHook(ctx context.Context, r *messages.HookRow, _ *hookevent.Payload) error {
	rc.mu.Lock()
	rc.calls[r.ID]++
	fail, block := rc.fail, rc.block
	rc.mu.Unlock()
	if r.ID == block {
		rc.blocked <- r.ID
		select {
		case <-rc.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail != nil {
		if err := fail(r); err != nil {
			return err
		}
	}
	rc.mu.Lock()
	rc.handled[r.SessionID] = append(rc.handled[r.SessionID], r.ID)
	rc.mu.Unlock()
	return nil
}

func (rc *recorder) sessionRows(s string) []int64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.handled[s])
}

func (rc *recorder) callsOf(id int64) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.calls[id]
}

// hookRig is a daemon's actor tree with hooks.db, its worker driven by a
// fake clock, a receiver's writer of the same file, and a reader.
type hookRig struct {
	t     *testing.T
	tree  *Tree
	clock *fakeClock
	w     *hookoutbox.Writer
	read  *sql.DB
	path  string
}

func startHookRig(t *testing.T, rc HookHandler, clock *fakeClock, path string, opts HooksOptions) *hookRig {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if path == "" {
		path = filepath.Join(t.TempDir(), "hooks.db")
	}
	hooks, err := persistence.OpenHooks(context.Background(), path, log)
	if err != nil {
		t.Fatal(err)
	}
	outbox, inbox := openStores(t, log)
	opts.Handler, opts.Clock = rc, clock.now
	tree, err := Start(NewSystem(log), Deps{Outbox: outbox, Inbox: inbox, Hooks: hooks, HookWorker: &opts, Log: log,
		Fatal: make(chan error, 1)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := hookoutbox.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	read, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	rig := &hookRig{t: t, tree: tree, clock: clock, w: w, read: read, path: path}
	t.Cleanup(func() { rig.stop(); outbox.Close(); inbox.Close(); hooks.Close() })
	return rig
}

// stop ends the tree (as a daemon's stop would, or a crash: the handler
// goroutines it started are not waited for).
func (rig *hookRig) stop() {
	if rig.tree == nil {
		return
	}
	rig.tree.System.Root.PoisonFuture(rig.tree.Root).Wait()
	rig.tree.System.Shutdown()
	rig.tree = nil
	rig.w.Close()
	rig.read.Close()
}

func (rig *hookRig) wake() { rig.tree.System.Root.Send(rig.tree.Hooks, &messages.HookWake{}) }

// add appends a row as a receiver would, at the clock's time.
func (rig *hookRig) add(session, typ string) {
	rig.t.Helper()
	err := rig.w.Append(context.Background(), hookoutbox.Row{SessionID: session, Agent: "claude", EventType: typ,
		Payload: []byte(`{"v":1,"event":"x"}`)}, rig.clock.now())
	if err != nil {
		rig.t.Fatal(err)
	}
}

// rowState is a hook_outbox row as the tests look at it.
type rowState struct {
	id          int64
	session     string
	typ         string
	attempts    int
	next        int64
	delivered   bool
	outcome     string
	lastError   string
	lockedAt    sql.NullInt64
	deliveredAt sql.NullInt64
}

func (rig *hookRig) rows() map[int64]rowState {
	rig.t.Helper()
	rs, err := rig.read.Query(`SELECT id, session_id, event_type, attempt_count, next_attempt_at, delivered_at, COALESCE(outcome, ''),
	  COALESCE(last_error, ''), locked_at FROM hook_outbox`)
	if err != nil {
		rig.t.Fatal(err)
	}
	defer rs.Close()
	out := map[int64]rowState{}
	for rs.Next() {
		var r rowState
		if err := rs.Scan(&r.id, &r.session, &r.typ, &r.attempts, &r.next, &r.deliveredAt, &r.outcome, &r.lastError, &r.lockedAt); err != nil {
			rig.t.Fatal(err)
		}
		r.delivered = r.deliveredAt.Valid
		out[r.id] = r
	}
	return out
}

// until polls cond until it holds, failing the test after 10 s.
func (rig *hookRig) until(what string, cond func(map[int64]rowState) bool) map[int64]rowState {
	rig.t.Helper()
	var rows map[int64]rowState
	if err := wait.Until(10*time.Second, what, func() bool { rows = rig.rows(); return cond(rows) }); err != nil {
		rig.t.Fatalf("%v; rows %+v", err, rows)
	}
	return rows
}

func allDelivered(rows map[int64]rowState) bool {
	for _, r := range rows {
		if !r.delivered {
			return false
		}
	}
	return len(rows) > 0
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// TestHooksWorkerOrderPerSession: rows of several sessions, written while
// the worker is parked, are all delivered, each session's in order.
func TestHooksWorkerOrderPerSession(t *testing.T) {
	rc := newRecorder()
	rig := startHookRig(t, rc, newClock(t0), "", HooksOptions{})
	want := map[string][]int64{}
	id := int64(0)
	for i := range 60 {
		s := fmt.Sprint("s", i%3)
		typ := []string{hookevent.SessionStart, hookevent.UserPromptSubmit, hookevent.AgentStop}[i%3]
		rig.add(s, typ)
		id++
		want[s] = append(want[s], id)
		rig.clock.advance(time.Millisecond)
	}
	rig.wake()
	rows := rig.until("all delivered", allDelivered)
	for s, ids := range want {
		if got := rc.sessionRows(s); !slices.Equal(got, ids) {
			t.Errorf("session %s handled %v, want %v", s, got, ids)
		}
	}
	for _, r := range rows {
		if r.outcome != messages.HookDelivered || r.lockedAt.Valid {
			t.Errorf("row %+v", r)
		}
	}
}

// TestHooksBackoffSchedule: a row whose handler keeps failing retryably is
// retried after 1, 2, 4, 8, 16, 32, 60, 60 s of the injected clock, holding
// back its session's later rows and no other session's; once it succeeds
// its session goes on in order.
func TestHooksBackoffSchedule(t *testing.T) {
	rc := newRecorder()
	var failing atomic.Bool
	failing.Store(true)
	rc.fail = func(r *messages.HookRow) error {
		if r.ID == 1 && failing.Load() {
			return &messages.Error{Status: 503, Code: "broker_unavailable", Detail: "down"}
		}
		return nil
	}
	clock := newClock(t0)
	rig := startHookRig(t, rc, clock, "", HooksOptions{})
	rig.add("a", hookevent.UserPromptSubmit) // 1
	rig.add("a", hookevent.AgentStop)        // 2
	rig.add("b", hookevent.UserPromptSubmit) // 3
	rig.wake()
	wantWaits := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60}
	for i, wait := range wantWaits {
		attempt := i + 1
		rows := rig.until(fmt.Sprintf("attempt %d recorded", attempt), func(rows map[int64]rowState) bool {
			return rows[1].attempts == attempt && !rows[1].lockedAt.Valid
		})
		if got, want := rows[1].next, clock.at(wait*time.Second); got != want {
			t.Fatalf("attempt %d: next_attempt_at %d, want now + %d s (%d)", attempt, got, wait, want)
		}
		if rows[1].lastError == "" || rows[2].delivered {
			t.Fatalf("attempt %d: row 1 %+v, row 2 %+v (row 2 must wait for row 1)", attempt, rows[1], rows[2])
		}
		rig.until("b goes on", func(rows map[int64]rowState) bool { return rows[3].delivered })
		// Not due a millisecond early.
		clock.advance(wait*time.Second - time.Millisecond)
		rig.wake()
		if rows := rig.rows(); rows[1].attempts != attempt {
			t.Fatalf("retried before its backoff: %+v", rows[1])
		}
		if attempt == len(wantWaits) {
			failing.Store(false)
		}
		clock.advance(time.Millisecond)
		rig.wake()
	}
	rows := rig.until("a delivered", allDelivered)
	if got := rc.sessionRows("a"); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("a handled %v", got)
	}
	if rows[1].attempts != len(wantWaits) || rows[1].outcome != messages.HookDelivered {
		t.Fatalf("row 1 %+v", rows[1])
	}
}

// TestHooksNonRetryableAndCorrupt: a non-retryable failure and a payload
// that is not JSON are marked delivered with the error at once, never
// retried; the session goes on.
func TestHooksNonRetryableAndCorrupt(t *testing.T) {
	rc := newRecorder()
	rc.fail = func(r *messages.HookRow) error {
		switch r.ID {
		case 1:
			return fmt.Errorf("register: %w", ErrHookNonRetryable)
		case 2:
			return &messages.Error{Status: 400, Code: "invalid_session", Detail: "pid 9 is not a running process"}
		}
		return nil
	}
	rig := startHookRig(t, rc, newClock(t0), "", HooksOptions{})
	rig.add("a", hookevent.SessionStart)
	rig.add("a", hookevent.UserPromptSubmit)
	err := rig.w.Append(context.Background(), hookoutbox.Row{SessionID: "a", Agent: "claude", EventType: hookevent.AgentStop,
		Payload: []byte(`{"v":1,"event":`)}, rig.clock.now())
	if err != nil {
		t.Fatal(err)
	}
	rig.add("a", "pre_compact") // no handler (a receiver never writes one)
	rig.add("a", hookevent.AgentStop)
	rig.wake()
	rows := rig.until("all delivered", allDelivered)
	for id, wantErr := range map[int64]string{1: "non-retryable", 2: "invalid_session", 3: "not valid JSON", 4: "no handler"} {
		r := rows[id]
		if r.outcome != messages.HookFailed || r.attempts != 0 || !strings.Contains(r.lastError, wantErr) {
			t.Errorf("row %d: %+v, want failed with %q", id, r, wantErr)
		}
	}
	if rc.callsOf(3) != 0 || rc.callsOf(4) != 0 {
		t.Error("the handler saw a corrupt or unhandled row")
	}
	if got := rc.sessionRows("a"); !slices.Equal(got, []int64{5}) {
		t.Errorf("handled %v", got)
	}
	if c := askStats(t, rig); c.Failed != 4 || c.Backlog != 0 {
		t.Errorf("stats %+v", c)
	}
}

func askStats(t *testing.T, rig *hookRig) *messages.HookCounts {
	t.Helper()
	res, err := rig.tree.System.Root.RequestFuture(rig.tree.Store, &messages.HookStats{}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	c := res.(*messages.HookCounts)
	if c.Err != nil {
		t.Fatal(c.Err)
	}
	return c
}

// TestHooksPruneAfterSevenDays: delivered rows go 7 days after their
// delivery by the injected clock, not before; undelivered rows stay.
func TestHooksPruneAfterSevenDays(t *testing.T) {
	clock := newClock(t0)
	path := filepath.Join(t.TempDir(), "hooks.db")
	rig := startHookRig(t, newRecorder(), clock, path, HooksOptions{})
	rig.add("a", hookevent.AgentStop) // 1, delivered at t0
	rig.wake()
	rig.until("delivered", allDelivered)
	rig.stop()
	clock.advance(24 * time.Hour)
	rig = startHookRig(t, newRecorder(), clock, path, HooksOptions{})
	rig.add("b", hookevent.AgentStop) // 2, delivered at t0 + 1 day
	rig.wake()
	rig.until("delivered", func(rows map[int64]rowState) bool { return rows[2].delivered })
	rig.stop()
	clock.advance(6*24*time.Hour + time.Minute) // row 1 is 7 days and a minute old, row 2 6 days
	rc := newRecorder()
	rc.block, rc.release = 3, make(chan struct{}) // row 3 stays undelivered
	rig = startHookRig(t, rc, clock, path, HooksOptions{})
	rig.add("c", hookevent.AgentStop)
	rig.wake() // the first wake prunes
	rows := rig.until("row 1 pruned", func(rows map[int64]rowState) bool { _, ok := rows[1]; return !ok })
	if _, ok := rows[2]; !ok {
		t.Fatal("row 2, delivered 6 days ago, was pruned")
	}
	if _, ok := rows[3]; !ok {
		t.Fatal("an undelivered row was pruned")
	}
	close(rc.release)
}

// TestHooksReclaimAfterCutoff: a worker dies while a row's handler runs;
// the next worker leaves that session alone until the lock is older than
// the cutoff (others go on), then handles the row again, then the rest.
func TestHooksReclaimAfterCutoff(t *testing.T) {
	clock := newClock(t0)
	path := filepath.Join(t.TempDir(), "hooks.db")
	dead := newRecorder()
	dead.block = 1
	rig := startHookRig(t, dead, clock, path, HooksOptions{Timeout: time.Hour})
	rig.add("a", hookevent.UserPromptSubmit) // 1: its handler never returns
	rig.add("a", hookevent.AgentStop)        // 2
	rig.wake()
	<-dead.blocked
	rig.stop() // the worker is gone, row 1 locked at t0

	clock.advance(10 * time.Second)
	rc := newRecorder()
	rig = startHookRig(t, rc, clock, path, HooksOptions{})
	rig.add("b", hookevent.SessionStart) // 3
	rig.wake()
	rows := rig.until("b delivered", func(rows map[int64]rowState) bool { return rows[3].delivered })
	if rows[1].delivered || rows[2].delivered || rc.callsOf(1) != 0 {
		t.Fatalf("session a went on before the lock cutoff: %+v %+v", rows[1], rows[2])
	}
	clock.advance(20 * time.Second) // the lock is 30 s old: not older than the cutoff yet
	rig.wake()
	if rows := rig.rows(); rows[1].delivered || rc.callsOf(1) != 0 {
		t.Fatalf("reclaimed before the cutoff: %+v", rows[1])
	}
	clock.advance(time.Millisecond)
	rig.wake()
	rig.until("a delivered", allDelivered)
	if got := rc.sessionRows("a"); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("a handled %v, want [1 2]", got)
	}
	close(dead.release)
}

// TestHooksBackpressure: a session's handler is held while 300 rows pile
// up: every critical row is handled, in order; each run of bursty rows
// ends in its latest row, the others coalesced; critical rows beyond the
// queue's bound wait in the outbox; no row is left behind.
func TestHooksBackpressure(t *testing.T) {
	rc := newRecorder()
	rc.block = 1
	rig := startHookRig(t, rc, newClock(t0), "", HooksOptions{Queue: 16})
	var critical, lastOfRun []int64
	id := int64(0)
	add := func(typ string) {
		rig.add("a", typ)
		id++
		if hookevent.Critical(typ) {
			critical = append(critical, id)
		}
	}
	add(hookevent.UserPromptSubmit) // 1: held
	for i := range 60 {
		for range 4 {
			add(hookevent.ToolUse)
		}
		if i%2 == 0 {
			add(hookevent.ToolDone)
		}
		lastOfRun = append(lastOfRun, id)
		add(hookevent.Notification)
	}
	rig.wake()
	<-rc.blocked
	rig.until("queue filled", func(rows map[int64]rowState) bool {
		n := 0
		for _, r := range rows {
			if r.outcome == messages.HookCoalesced {
				n++
			}
		}
		return n > 0
	})
	close(rc.release)
	rows := rig.until("all delivered", allDelivered)
	handled := rc.sessionRows("a")
	var gotCritical []int64
	for _, h := range handled {
		if hookevent.Critical(rows[h].typ) {
			gotCritical = append(gotCritical, h)
		}
	}
	if !slices.Equal(gotCritical, critical) {
		t.Fatalf("critical rows handled %v, want %v", gotCritical, critical)
	}
	if !slices.IsSorted(handled) {
		t.Fatalf("handled out of order: %v", handled)
	}
	for _, r := range rows {
		switch {
		case hookevent.Critical(r.typ) && r.outcome != messages.HookDelivered:
			t.Errorf("critical row %+v", r)
		case r.outcome == messages.HookCoalesced && r.lastError == "":
			t.Errorf("coalesced row without a note: %+v", r)
		case !hookevent.Critical(r.typ) && r.outcome == messages.HookDelivered && !slices.Contains(lastOfRun, r.id):
			// a bursty row handled is the last of its run, or was alone
			// in the queue when its handler was free.
		}
	}
	for _, last := range lastOfRun {
		if rows[last].outcome == messages.HookCoalesced {
			t.Errorf("the latest row of a run was coalesced: %+v", rows[last])
		}
	}
}

// TestHookQueue is the spec's backpressure table, row by row.
func TestHookQueue(t *testing.T) {
	row := func(id int64, typ string) messages.HookRow { return messages.HookRow{ID: id, EventType: typ} }
	var q hookQueue
	steps := []struct {
		r       messages.HookRow
		dropped []messages.HookOutcome
		queued  bool
		left    []int64
	}{
		{row(1, hookevent.ToolUse), nil, true, []int64{1}},
		{row(2, hookevent.ToolDone), []messages.HookOutcome{{ID: 1, Kind: messages.HookCoalesced}}, true, []int64{2}},
		{row(3, hookevent.AgentStop), nil, true, []int64{2, 3}},
		{row(4, hookevent.ToolUse), nil, true, []int64{2, 3, 4}}, // a new run: not coalesced with 2
		{row(5, hookevent.Notification), []messages.HookOutcome{{ID: 2, Kind: messages.HookEvicted}}, true, []int64{3, 4, 5}},
		{row(6, hookevent.Error), []messages.HookOutcome{{ID: 4, Kind: messages.HookEvicted}}, true, []int64{3, 5, 6}},
		{row(7, hookevent.ToolUse), []messages.HookOutcome{{ID: 7, Kind: messages.HookEvicted}}, true, []int64{3, 5, 6}},
		{row(8, hookevent.SessionStart), nil, false, []int64{3, 5, 6}},
	}
	for i, s := range steps {
		dropped, queued := q.push(s.r, 3)
		for j := range dropped {
			if dropped[j].Error == "" || dropped[j].EventType == "" {
				t.Fatalf("step %d: an outcome without its note or type: %+v", i, dropped[j])
			}
			dropped[j].Error, dropped[j].EventType = "", ""
		}
		var left []int64
		for _, r := range q.rows {
			left = append(left, r.ID)
		}
		if !slices.Equal(dropped, s.dropped) || queued != s.queued || !slices.Equal(left, s.left) {
			t.Fatalf("step %d: dropped %v queued %v left %v; want %v %v %v", i, dropped, queued, left, s.dropped, s.queued, s.left)
		}
	}
}

func TestHookBackoffAndRetryable(t *testing.T) {
	var got []time.Duration
	for a := 0; a <= 9; a++ {
		got = append(got, HookBackoff(a))
	}
	s := time.Second
	if want := []time.Duration{s, s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 60 * s, 60 * s, 60 * s}; !slices.Equal(got, want) {
		t.Fatalf("backoff %v", got)
	}
	for err, want := range map[error]bool{
		errors.New("dial: refused"):                       true,
		context.DeadlineExceeded:                          true,
		&messages.Error{Status: 503}:                      true,
		&messages.Error{Status: 429}:                      true,
		&messages.Error{Status: 400}:                      false,
		&messages.Error{Status: 409}:                      false,
		fmt.Errorf("x: %w", ErrHookNonRetryable):          false,
		fmt.Errorf("x: %w", &messages.Error{Status: 404}): false,
	} {
		if hookRetryable(err) != want {
			t.Errorf("retryable(%v) = %v", err, !want)
		}
	}
}
