package daemon_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/actors/daemon"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/persistence/hookoutbox"
)

// hookMixes are the backlogs BenchmarkHookDrain drains, a turn after the
// other: "turns" is an agent's turn as its hooks report it (a prompt, a
// dozen tool calls of a PreToolUse and a PostToolUse each, a stop: 2
// critical rows in 26); "critical" has 4 critical rows in 10 (a prompt,
// a notification and a stop among three tool calls).
var hookMixes = map[string][]string{
	"turns": func() []string {
		turn := []string{"user_prompt_submit"}
		for range 12 {
			turn = append(turn, "tool_use", "tool_done")
		}
		return append(turn, "agent_stop")
	}(),
	"critical": {"user_prompt_submit", "tool_use", "tool_done", "tool_use", "tool_done", "tool_use", "tool_done",
		"notification", "tool_use", "agent_stop"},
}

// BenchmarkHookDrain measures the hooks worker draining a backlog: b.N
// rows of 8 agent sessions, a turn after the other (hookMixes), committed to hooks.db at once while a daemon runs on its
// embedded broker; the time from the worker's wake to the last row
// delivered. Reported: rows drained per second, and the presence updates
// (POST /v1/profile) that took — the bursty rows coalesce, the critical
// ones are each handled.
//
//	go test -run='^$' -bench=BenchmarkHookDrain -benchtime=100000x ./actors/daemon/
func BenchmarkHookDrain(b *testing.B) {
	for _, mix := range []string{"turns", "critical"} {
		b.Run("mix="+mix, func(b *testing.B) { benchHookDrain(b, hookMixes[mix]) })
	}
}

func benchHookDrain(b *testing.B, turn []string) {
	const sessions = 8
	dir, err := os.MkdirTemp("", "cmhd")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	paths := config.Paths{DaemonDir: filepath.Join(dir, "d"), ConfigDir: filepath.Join(dir, "c")}
	cfg := config.DefaultFile()
	cfg.IPC.TCPEnabled = false
	d, err := daemon.Start(daemon.Options{Paths: paths, Config: cfg, Version: "bench",
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(d.Close)
	hc := unixClient(paths.Socket(), 4)
	w, err := hookoutbox.Open(paths.HooksDB(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	db, err := sql.Open("sqlite", "file:"+paths.HooksDB()+"?_pragma=busy_timeout(5000)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	waitDrained := func(within time.Duration) {
		wait.For(b, within, "every row delivered", func() bool {
			var n int // 0 or 1: a count of the backlog would cost the daemon's CPU
			if err := db.QueryRow(`SELECT COUNT(*) FROM (SELECT 1 FROM hook_outbox WHERE delivered_at IS NULL LIMIT 1)`).Scan(&n); err != nil {
				b.Fatal(err)
			}
			return n == 0
		})
	}
	// The sessions register with their first rows, and their broker
	// connections come up, before the backlog is timed.
	payload := fmt.Sprintf(`{"v":1,"event":"x","cwd":"/bench","pid":%d}`, os.Getpid())
	for s := range sessions {
		row := hookoutbox.Row{SessionID: fmt.Sprint("bench-", s), Agent: "claude", EventType: "session_start", Payload: []byte(payload)}
		if err := w.Append(context.Background(), row, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	hookoutbox.Poke(paths.HookWake())
	waitDrained(30 * time.Second)
	before := profilePosts(b, hc)

	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for i := range b.N {
		s, k := i%sessions, i/sessions
		if _, err := tx.Exec(`INSERT INTO hook_outbox (session_id, agent, event_type, payload, created_at, next_attempt_at)
		  VALUES (?, 'claude', ?, ?, ?, ?)`, fmt.Sprint("bench-", s), turn[k%len(turn)], payload, now, now); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	hookoutbox.Poke(paths.HookWake())
	waitDrained(10 * time.Minute)
	took := time.Since(start)
	b.StopTimer()
	posts := profilePosts(b, hc) - before
	var coalesced int
	db.QueryRow(`SELECT COUNT(*) FROM hook_outbox WHERE outcome = 'coalesced'`).Scan(&coalesced)
	b.ReportMetric(float64(b.N)/took.Seconds(), "rows/s")
	b.ReportMetric(float64(posts), "presence_posts")
	b.ReportMetric(float64(coalesced), "coalesced")
}

// profilePosts reads the daemon's count of POST /v1/profile answers.
func profilePosts(b *testing.B, hc *http.Client) int {
	resp, err := hc.Get("http://localhost/v1/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "cm_daemon_ipc_requests_total{") && strings.Contains(line, `endpoint="/v1/profile"`) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			n += int(v)
		}
	}
	return n
}
