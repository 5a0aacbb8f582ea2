package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
)

// BenchmarkMCPMailSend: agents send mail through the MCP server — each
// client its own claudemesh-mcp (what install claude-code registers) and
// agent session — to one session on the same daemon, every message in a
// thread and asking for an acknowledgement: send_message's whole path
// (JSON-RPC on stdio, the tool's schemas, the daemon's accept and its
// fsync, the header sealed beside the body), the daemon's embedded broker
// on SQLite delivering each to the recipient meanwhile, as `claudemesh
// daemon up` runs with no mesh joined. It reports messages/s and the p50
// and p99 of a send_message call, and the daemon's own figures of the run
// (daemonSendFigures), with 1 and 16 clients, under [outbox]
// fsync_mode strict (the default: each answer waits for its fsync) and
// batched_50ms. Each client is rawMCP, a line-at-a-time JSON-RPC client
// (the handshake, then one call at a time): the official SDK's client
// spent about as much CPU a call as the server, which on these two cores
// it took from the server measured (the rates were 25–45 % lower).
//
//	go test -run='^$' -bench=BenchmarkMCPMailSend -benchtime=5000x ./integration/
//
// The clients run with the runtime's monitor kept awake, as the daemon
// and the MCP servers do (keepMonitorAwake). With GODEBUG=schedtrace=0 in
// its environment, every process of the run has it sleeping deeply, as
// before cmd/internal/sysmon kept it awake.
func BenchmarkMCPMailSend(b *testing.B) {
	for _, mode := range []string{"strict", "batched_50ms"} {
		for _, clients := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/clients_%d", mode, clients), func(b *testing.B) { benchMailSend(b, mode, clients, false) })
		}
	}
}

// BenchmarkIPCMailSend is BenchmarkMCPMailSend without the MCP servers:
// each client an agent session posting the same mail to POST /v1/send
// itself, from the benchmark's process, under fsync_mode strict — what
// the daemon alone gives, against which the MCP hop is measured.
//
//	go test -run='^$' -bench=BenchmarkIPCMailSend -benchtime=5000x ./integration/
func BenchmarkIPCMailSend(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients_%d", clients), func(b *testing.B) { benchMailSend(b, "strict", clients, true) })
	}
}

// benchMailSend runs clients senders of mail to one session of a fresh
// daemon: through claudemesh-mcp (rawMCP), or, direct, to the session
// routes themselves.
func benchMailSend(b *testing.B, fsync string, clients int, direct bool) {
	e := benchHookEnv(b)
	if err := os.WriteFile(filepath.Join(e.daemonDir, "config.toml"), []byte("[outbox]\nfsync_mode = \""+fsync+"\"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	stop := benchDaemon(b, e)
	defer stop()
	n := 1
	if direct {
		n += clients
	}
	ipcSessions := benchSessions(b, e, n) // the recipient, then the direct senders
	me, err := ipcSessions[0].SessionMe(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	to := me.Presence.SessionPubkey
	calls := make([]func(i int) error, clients)
	var mcpPIDs []int
	for c := range calls {
		if direct {
			s := ipcSessions[1+c]
			calls[c] = func(i int) error {
				msg := fmt.Sprint("status update ", i)
				_, err := s.Send(context.Background(), &messages.SendRequest{To: to, Message: &msg, ThreadID: "bench-thread",
					AckRequired: true, Subject: "status"}, "")
				return err
			}
			continue
		}
		cs := startRawMCP(b, e, fmt.Sprint("mailer-", c))
		mcpPIDs = append(mcpPIDs, cs.cmd.Process.Pid)
		calls[c] = func(i int) error {
			return cs.callTool("send_message", map[string]any{
				"to": to, "message": fmt.Sprint("status update ", i), "thread_id": "bench-thread", "ack_required": true,
				"subject": "status"})
		}
	}
	for c, call := range calls { // warm: each session linked, its first call made
		wait.For(b, startDeadline, "the sessions' broker connections", func() bool { return call(-1-c) == nil })
	}
	metrics := unixClient(e.socket())
	defer metrics.CloseIdleConnections()
	before := daemonSendFigures(b, metrics)
	mcpBefore, clientBefore := procCPU(b, mcpPIDs...), procCPU(b, os.Getpid())
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c, call := range calls {
		wg.Go(func() {
			for i := c; i < b.N; i += clients {
				t0 := time.Now()
				if err := call(i); err != nil {
					b.Error(err)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "msgs/s")
	what := "send_message"
	if direct {
		what = "ipc_send"
	}
	reportPercentiles(b, fmt.Sprintf("%s_%d_clients", what, clients), all)
	after := daemonSendFigures(b, metrics)
	sends := after[1] - before[1]
	b.ReportMetric((after[0]-before[0])/sends*1e3, "daemon-send-ms")
	if fsyncs := after[3] - before[3]; fsyncs > 0 {
		b.ReportMetric((after[2]-before[2])/fsyncs*1e3, "outbox-fsync-ms")
	}
	b.ReportMetric((after[4]-before[4])/sends*1e3, "daemon-cpu-ms/msg")
	if clientBefore < 0 {
		return // no /proc: the daemon's CPU only
	}
	if !direct {
		b.ReportMetric((procCPU(b, mcpPIDs...)-mcpBefore).Seconds()/sends*1e3, "mcp-cpu-ms/msg")
	}
	b.ReportMetric((procCPU(b, os.Getpid())-clientBefore).Seconds()/sends*1e3, "client-cpu-ms/msg")
}

// procCPU is the CPU time the processes pids have used so far: the sum
// over their threads of the first field of /proc/<pid>/task/<tid>/schedstat
// (nanoseconds on a CPU), finer than the clock ticks of /proc/<pid>/stat;
// a thread that ends takes its share with it (Go seldom ends one).
// With the daemon's, it shows where the 2 cores' time per message goes:
// the MCP servers', and the benchmark's own client (its process). It is
// -1 where there is no /proc/<pid>/task (not Linux).
func procCPU(b *testing.B, pids ...int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		if err != nil || len(stats) == 0 {
			return -1
		}
		for _, f := range stats {
			data, err := os.ReadFile(f)
			if err != nil {
				continue // a thread that ended meanwhile
			}
			ns, err := strconv.ParseInt(strings.Fields(string(data))[0], 10, 64)
			if err != nil {
				b.Fatalf("%s: %v", f, err)
			}
			sum += time.Duration(ns)
		}
	}
	return sum
}

// daemonSendFigures reads the daemon's GET /v1/metrics: the time its POST
// /v1/send answers took in all and how many there were, the time its
// outbox.db WAL fsyncs took and how many, and its CPU time (seconds). Their
// differences over a run are what the daemon spent on it: the benchmarks
// report the mean answer, the mean fsync (which a strict answer waits for)
// and the CPU per message.
func daemonSendFigures(b *testing.B, c *http.Client) [5]float64 {
	var out [5]float64
	for i, series := range []string{`cm_daemon_ipc_duration_seconds_sum{endpoint="/v1/send"}`,
		`cm_daemon_ipc_duration_seconds_count{endpoint="/v1/send"}`,
		`cm_daemon_store_commit_seconds_sum{db="outbox",durability="wal_sync"}`,
		`cm_daemon_store_commit_seconds_count{db="outbox",durability="wal_sync"}`, "process_cpu_seconds_total"} {
		out[i] = metricValue(b, c, series)
	}
	return out
}
