package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/hookoutbox"
)

// hooksDB is a fresh hooks.db in a temp dir and a receiver's writer of it.
func hooksDB(t *testing.T) (*Hooks, *hookoutbox.Writer) { return hooksDBB(t) }

func hooksDBB(t testing.TB) (*Hooks, *hookoutbox.Writer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hooks.db")
	h, err := OpenHooks(context.Background(), path, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	w, err := hookoutbox.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return h, w
}

// hooksBatch runs fn in one batch transaction and commits it.
func hooksBatch(t *testing.T, h *Hooks, fn func(tx *Tx)) {
	t.Helper()
	b, err := h.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fn(b.Tx())
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
}

func appendRow(t *testing.T, w *hookoutbox.Writer, session, typ string, at int64) {
	t.Helper()
	row := hookoutbox.Row{SessionID: session, Agent: "claude", EventType: typ, Payload: []byte(`{"v":1}`)}
	if err := w.Append(context.Background(), row, time.UnixMilli(at)); err != nil {
		t.Fatal(err)
	}
}

func claimHooks(t *testing.T, h *Hooks, c messages.ClaimHooks) *messages.HooksClaimed {
	t.Helper()
	var out *messages.HooksClaimed
	hooksBatch(t, h, func(tx *Tx) {
		var err error
		if out, err = h.Claim(tx, &c); err != nil {
			t.Fatal(err)
		}
	})
	return out
}

func finish(t *testing.T, h *Hooks, now int64, outcomes ...messages.HookOutcome) int64 {
	t.Helper()
	var n int64
	hooksBatch(t, h, func(tx *Tx) {
		var err error
		if n, err = h.Finish(tx, &messages.FinishHooks{Now: now, Outcomes: outcomes}); err != nil {
			t.Fatal(err)
		}
	})
	return n
}

// hookIDs lists the rows' ids as "session:id".
func hookIDs(rows []messages.HookRow) []string {
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprintf("%s:%d", r.SessionID, r.ID))
	}
	return out
}

const lockCutoff = 30_000 // ms

// TestHooksClaimOrderAndLocks: the claim takes due rows oldest first, up
// to its limit; a claimed row is not claimed again until its lock is older
// than the cutoff; an excluded session's rows wait.
func TestHooksClaimOrderAndLocks(t *testing.T) {
	h, w := hooksDB(t)
	const t0 = 1_000_000
	for i, s := range []string{"a", "b", "a", "c", "b"} {
		appendRow(t, w, s, "tool_use", t0+int64(i))
	}
	got := claimHooks(t, h, messages.ClaimHooks{Now: t0 + 10, Cutoff: t0 + 10 - lockCutoff, Limit: 3})
	if want := []string{"a:1", "b:2", "a:3"}; !slices.Equal(hookIDs(got.Rows), want) {
		t.Fatalf("first claim %v, want %v", hookIDs(got.Rows), want)
	}
	got = claimHooks(t, h, messages.ClaimHooks{Now: t0 + 20, Cutoff: t0 + 20 - lockCutoff, Limit: 25, Exclude: []string{"c"}})
	if want := []string{"b:5"}; !slices.Equal(hookIDs(got.Rows), want) {
		t.Fatalf("second claim %v, want %v (claimed rows are locked, c excluded)", hookIDs(got.Rows), want)
	}
	// 30 s later the first claim's locks are stale: taken over, oldest first.
	now := int64(t0 + 10 + lockCutoff + 1)
	got = claimHooks(t, h, messages.ClaimHooks{Now: now, Cutoff: now - lockCutoff, Limit: 25})
	if want := []string{"a:1", "b:2", "a:3", "c:4"}; !slices.Equal(hookIDs(got.Rows), want) {
		t.Fatalf("after the cutoff %v, want %v", hookIDs(got.Rows), want)
	}
	if got.Rows[0].Payload == nil || got.Rows[0].CreatedAt != t0 || got.Rows[0].EventType != "tool_use" {
		t.Fatalf("row %+v", got.Rows[0])
	}
}

// TestHooksRetryHoldsSession: a row waiting for its retry holds back the
// later rows of its session, not those of others; once due, it comes first.
func TestHooksRetryHoldsSession(t *testing.T) {
	h, w := hooksDB(t)
	const t0 = 2_000_000
	for i, s := range []string{"a", "a", "b", "a"} {
		appendRow(t, w, s, "agent_stop", t0+int64(i))
	}
	got := claimHooks(t, h, messages.ClaimHooks{Now: t0 + 5, Cutoff: t0 + 5 - lockCutoff, Limit: 1})
	if want := []string{"a:1"}; !slices.Equal(hookIDs(got.Rows), want) {
		t.Fatalf("claim %v", hookIDs(got.Rows))
	}
	if n := finish(t, h, t0+6, messages.HookOutcome{ID: 1, Kind: messages.HookRetry, Error: "broker down", NextAttempt: t0 + 1006}); n != 1 {
		t.Fatalf("retry changed %d rows", n)
	}
	got = claimHooks(t, h, messages.ClaimHooks{Now: t0 + 7, Cutoff: t0 + 7 - lockCutoff, Limit: 25})
	if want := []string{"b:3"}; !slices.Equal(hookIDs(got.Rows), want) {
		t.Fatalf("during the backoff %v, want %v", hookIDs(got.Rows), want)
	}
	got = claimHooks(t, h, messages.ClaimHooks{Now: t0 + 1006, Cutoff: t0 + 1006 - lockCutoff, Limit: 25})
	if want := []string{"a:1", "a:2", "a:4"}; !slices.Equal(hookIDs(got.Rows), want) {
		t.Fatalf("once due %v, want %v", hookIDs(got.Rows), want)
	}
	if got.Rows[0].Attempts != 1 {
		t.Fatalf("attempts %d", got.Rows[0].Attempts)
	}
	c := stats(t, h)
	if c.Backlog != 4 || c.Retrying != 1 || c.LastError != "broker down" || c.OldestCreatedAt != t0 {
		t.Fatalf("stats %+v", c)
	}
}

func stats(t *testing.T, h *Hooks) *messages.HookCounts {
	t.Helper()
	var c *messages.HookCounts
	hooksBatch(t, h, func(tx *Tx) {
		var err error
		if c, err = h.Stats(tx); err != nil {
			t.Fatal(err)
		}
	})
	return c
}

// TestHooksFinishAndPrune: every outcome kind does what it says, a late
// outcome of a delivered row changes nothing, and pruning deletes the rows
// delivered before its bound, and only those.
func TestHooksFinishAndPrune(t *testing.T) {
	h, w := hooksDB(t)
	const t0 = 3_000_000
	for i := range 6 {
		appendRow(t, w, "s", "tool_use", t0+int64(i))
	}
	claimHooks(t, h, messages.ClaimHooks{Now: t0 + 10, Cutoff: t0 + 10 - lockCutoff, Limit: 25})
	n := finish(t, h, t0+20,
		messages.HookOutcome{ID: 1, Kind: messages.HookDelivered},
		messages.HookOutcome{ID: 2, Kind: messages.HookDelivered},
		messages.HookOutcome{ID: 3, Kind: messages.HookFailed, Error: "payload is not valid JSON"},
		messages.HookOutcome{ID: 4, Kind: messages.HookCoalesced, Error: "coalesced into row 5"},
		messages.HookOutcome{ID: 5, Kind: messages.HookEvicted, Error: "evicted: queue full"},
		messages.HookOutcome{ID: 6, Kind: messages.HookReleased})
	if n != 6 {
		t.Fatalf("finish changed %d rows, want 6", n)
	}
	if n := finish(t, h, t0+30, messages.HookOutcome{ID: 1, Kind: messages.HookRetry, NextAttempt: t0 + 99}); n != 0 {
		t.Fatalf("a retry of a delivered row changed %d rows", n)
	}
	c := stats(t, h)
	if c.Backlog != 1 || c.Failed != 1 || c.OldestCreatedAt != t0+5 {
		t.Fatalf("stats %+v", c)
	}
	got := claimHooks(t, h, messages.ClaimHooks{Now: t0 + 40, Cutoff: t0 + 40 - lockCutoff, Limit: 25})
	if want := []string{"s:6"}; !slices.Equal(hookIDs(got.Rows), want) {
		t.Fatalf("released row: %v", hookIDs(got.Rows))
	}
	var pruned int64
	hooksBatch(t, h, func(tx *Tx) {
		var err error
		if pruned, err = h.Prune(tx, t0+20, 100); err != nil { // delivered at t0+20: not before it
			t.Fatal(err)
		}
	})
	if pruned != 0 {
		t.Fatalf("pruned %d rows delivered at the bound", pruned)
	}
	hooksBatch(t, h, func(tx *Tx) {
		var err error
		if pruned, err = h.Prune(tx, t0+21, 2); err != nil {
			t.Fatal(err)
		}
	})
	if pruned != 2 {
		t.Fatalf("pruned %d, want the limit 2", pruned)
	}
}

// TestHooksRecoverLocks: a worker's first claim learns which sessions have
// rows a previous worker locked less than the cutoff ago, and leaves their
// later rows alone.
func TestHooksRecoverLocks(t *testing.T) {
	h, w := hooksDB(t)
	const t0 = 4_000_000
	appendRow(t, w, "a", "user_prompt_submit", t0)
	appendRow(t, w, "b", "user_prompt_submit", t0+1)
	appendRow(t, w, "a", "agent_stop", t0+2)
	claimHooks(t, h, messages.ClaimHooks{Now: t0 + 5, Cutoff: t0 + 5 - lockCutoff, Limit: 1}) // a:1, then the worker dies
	got := claimHooks(t, h, messages.ClaimHooks{Now: t0 + 100, Cutoff: t0 + 100 - lockCutoff, Limit: 25, Recover: true})
	if want := []string{"b:2"}; !slices.Equal(hookIDs(got.Rows), want) {
		t.Fatalf("claim %v", hookIDs(got.Rows))
	}
	if len(got.Locked) != 1 || got.Locked["a"] != t0+5 {
		t.Fatalf("locked %v, want a at %d", got.Locked, t0+5)
	}
}

// TestHookReceiverCreatesDB: the first receivers find no hooks.db; they
// create it, racing, and every row lands. The race is run 100 times: a
// receiver that met the file half made, or whose switch of it to WAL met
// another's, failed once in some hundred.
func TestHookReceiverCreatesDB(t *testing.T) {
	for range 100 {
		raceHooksCreation(t)
	}
}

// TestHooksCreationStuckHolder: a process holding hooks.db.lock and never
// letting go (stopped) holds up the creation of hooks.db for
// DefaultBusyTimeout, not for ever: the receiver's row lands.
func TestHooksCreationStuckHolder(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "hooks.db")
	held, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX); err != nil { // another open file: another holder
		t.Fatal(err)
	}
	w, err := hookoutbox.Open(path, CreateHooks)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Append(context.Background(), hookoutbox.Row{SessionID: "s", Agent: "claude", EventType: "session_start",
		Payload: []byte(`{}`)}, time.Now()); err != nil {
		t.Fatal(err)
	}
}

func raceHooksCreation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hooks.db")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			w, err := hookoutbox.Open(path, CreateHooks)
			if err == nil {
				err = w.Append(context.Background(), hookoutbox.Row{SessionID: fmt.Sprint("s", i), Agent: "claude",
					EventType: "session_start", Payload: []byte(`{}`)}, time.Now())
				w.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != FileMode {
		t.Fatalf("hooks.db: %v, mode %v", err, st.Mode())
	}
	h, err := OpenHooks(context.Background(), path, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if c := stats(t, h); c.Backlog != 8 {
		t.Fatalf("backlog %d, want 8", c.Backlog)
	}
}

// TestHookReceiverFailures: a writer of a path it cannot create fails, and
// the failure is recorded and counted.
func TestHookReceiverFailures(t *testing.T) {
	dir := t.TempDir()
	w, err := hookoutbox.Open(filepath.Join(dir, "missing", "hooks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	werr := w.Append(context.Background(), hookoutbox.Row{SessionID: "s", Agent: "claude", EventType: "tool_use",
		Payload: []byte(`{}`)}, time.Now())
	if werr == nil {
		t.Fatal("append to a missing directory succeeded")
	}
	log := filepath.Join(dir, "hooks.errors")
	for range 3 {
		if err := hookoutbox.RecordFailure(log, time.UnixMilli(42), "claude", "PreToolUse", werr); err != nil {
			t.Fatal(err)
		}
	}
	n, last, err := hookoutbox.Failures(log)
	if err != nil || n != 3 || len(last) < 10 || last[:3] != "42\t" {
		t.Fatalf("failures %d %q %v", n, last, err)
	}
	if f, ok := hookoutbox.ParseFailure(last); !ok || f.At.UnixMilli() != 42 || f.Agent != "claude" || f.Event != "PreToolUse" || f.Err != werr.Error() {
		t.Errorf("the last failure read back as %+v, %v", f, ok)
	}
	if _, ok := hookoutbox.ParseFailure("not\ta failure line"); ok {
		t.Error("a line of three fields read as a failure")
	}
	if n, _, err := hookoutbox.Failures(filepath.Join(dir, "none")); n != 0 || err != nil {
		t.Fatalf("no file: %d %v", n, err)
	}
	if err := hookoutbox.Poke(filepath.Join(dir, "hooks.wake")); err == nil {
		t.Fatal("a poke of nobody succeeded")
	}
}

// TestHookWriterBoundsWAL: past hookoutbox.MaxWAL the writer empties the
// WAL into hooks.db, losing no row; while another connection reads (the
// daemon), it leaves the WAL alone at once instead of waiting.
func TestHookWriterBoundsWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hooks.db")
	w, err := hookoutbox.Open(path, CreateHooks)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	walSize := func() int64 {
		st, err := os.Stat(path + "-wal")
		if errors.Is(err, os.ErrNotExist) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	n := 0
	grow := func() {
		for walSize() <= hookoutbox.MaxWAL {
			appendRow(t, w, "s", "tool_use", int64(n))
			n++
		}
	}
	grow()
	if err := w.BoundWAL(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := walSize(); s != 0 {
		t.Fatalf("WAL of %d bytes after BoundWAL, want it emptied", s)
	}

	h, err := OpenHooks(context.Background(), path, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	rdb, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	reader, err := rdb.BeginTx(context.Background(), nil) // a read that pins the WAL
	if err != nil {
		t.Fatal(err)
	}
	var before int
	if err := reader.QueryRow(`SELECT count(*) FROM hook_outbox`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	grow()
	_ = w.BoundWAL(context.Background()) // busy: returns without waiting for the reader
	_ = reader.Rollback()
	if s := stats(t, h); s.Backlog != n {
		t.Fatalf("backlog %d, want every one of the %d rows", s.Backlog, n)
	}
}
