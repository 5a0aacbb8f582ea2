package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCPMailSend: agents send mail through the MCP server — each
// client its own claudemesh-mcp (what install claude-code registers) and
// agent session — to one session on the same daemon, every message in a
// thread and asking for an acknowledgement: send_message's whole path
// (JSON-RPC on stdio, the tool's schemas, the daemon's accept and its
// fsync, the header sealed beside the body), the daemon's embedded broker
// on SQLite delivering each to the recipient meanwhile, as `claudemesh
// daemon up` runs with no mesh joined. It reports messages/s and the p50
// and p99 of a send_message call, with 1 and 16 clients, under [outbox]
// fsync_mode strict (the default: each answer waits for its fsync) and
// batched_50ms.
//
//	go test -run='^$' -bench=BenchmarkMCPMailSend -benchtime=5000x ./integration/
func BenchmarkMCPMailSend(b *testing.B) {
	for _, mode := range []string{"strict", "batched_50ms"} {
		for _, clients := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/clients_%d", mode, clients), func(b *testing.B) { benchMailSend(b, mode, clients) })
		}
	}
}

func benchMailSend(b *testing.B, fsync string, clients int) {
	e := benchHookEnv(b)
	if err := os.WriteFile(filepath.Join(e.daemonDir, "config.toml"), []byte("[outbox]\nfsync_mode = \""+fsync+"\"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	stop := benchDaemon(b, e)
	defer stop()
	sink := benchSessions(b, e, 1)[0]
	me, err := sink.SessionMe(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	to := me.Presence.SessionPubkey
	sessions := make([]*mcp.ClientSession, clients)
	for i := range sessions {
		sessions[i] = benchMCP(b, e, fmt.Sprint("mailer-", i))
		defer sessions[i].Close()
	}
	call := func(cs *mcp.ClientSession, i int) error {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_message", Arguments: map[string]any{
			"to": to, "message": fmt.Sprint("status update ", i), "thread_id": "bench-thread", "ack_required": true,
			"subject": "status"}})
		if err == nil && res.IsError {
			err = fmt.Errorf("send_message: %s", text(res))
		}
		return err
	}
	for i, cs := range sessions { // warm: each session linked, its first call made
		waitBench(b, func() bool { return call(cs, -1-i) == nil })
	}
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c, cs := range sessions {
		wg.Go(func() {
			for i := c; i < b.N; i += clients {
				t0 := time.Now()
				if err := call(cs, i); err != nil {
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
	reportPercentiles(b, fmt.Sprintf("send_message_%d_clients", clients), all)
}

// benchMCP starts claudemesh-mcp as the agent session name on e's daemon
// and connects to it.
func benchMCP(b *testing.B, e *env, name string) *mcp.ClientSession {
	cmd := exec.Command(mcpBinPath, "--name", name)
	cmd.Env = e.environ()
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), mcpDeadline)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

// waitBench polls cond until it holds (the sessions' broker connections
// come up on their own), failing after startDeadline.
func waitBench(b *testing.B, cond func() bool) {
	for deadline := time.Now().Add(startDeadline); !cond(); time.Sleep(pollInterval) {
		if time.Now().After(deadline) {
			b.Fatal("not ready in time")
		}
	}
}
