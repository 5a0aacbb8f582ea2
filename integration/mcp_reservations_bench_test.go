package integration

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCPReservation: reservation requests as an agent makes them,
// tool calls through `claudemesh mcp` (the SDK's client over stdio) to
// the daemon, the session's broker connection and the daemon's embedded
// broker on SQLite. One session holds src/** exclusively; another's
// reserve_files of src/app.py is refused (the conflicts read and decided
// on the broker), and its reserve_files of docs/*.md granted (a grant
// written). It reports the p50 and p99 of each, in ms.
//
//	go test -run='^$' -bench=BenchmarkMCPReservation -benchtime=500x ./integration/
func BenchmarkMCPReservation(b *testing.B) {
	e := benchHookEnv(b)
	stop := benchDaemon(b, e)
	defer stop()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	sessions := make([]*mcp.ClientSession, 2)
	for i, name := range []string{"holder", "asker"} {
		cmd := exec.Command(binPath, "mcp", "--name", name)
		cmd.Env = e.environ()
		cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		sessions[i] = cs
	}
	reserve := func(cs *mcp.ClientSession, pattern string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), mcpDeadline)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "reserve_files", Arguments: map[string]any{"patterns": []string{pattern}}})
		if err != nil || res.IsError {
			b.Fatalf("reserve_files %s: %v %v", pattern, err, res)
		}
		return res.StructuredContent.(map[string]any)["granted"] == true
	}
	if !reserve(sessions[0], "src/**") {
		b.Fatal("the holder's src/** was refused")
	}
	refusals, grants := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if reserve(sessions[1], "src/app.py") {
			b.Fatal("src/app.py granted beside the holder's src/**")
		}
		refusals = append(refusals, time.Since(start))
		start = time.Now()
		if !reserve(sessions[1], "docs/*.md") {
			b.Fatal("docs/*.md refused")
		}
		grants = append(grants, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, "refusal", refusals)
	reportPercentiles(b, "grant", grants)
}
