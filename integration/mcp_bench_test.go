package integration

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// BenchmarkMCPFirstToolAnswer measures an MCP server from its start to
// the answer of its first tool call (check_messages), a daemon running:
// exec, the MCP handshake, the session's registration, one inbox read.
// The lean claudemesh-mcp (what install claude-code registers) and
// `claudemesh mcp` take turns, each with GODEBUG set in its environment,
// and the lean one again without it, as install claude-code registers it
// (_reexec: it then re-executes itself once to set it); each reports its
// p50 and p99 in ms.
//
//	go test -run='^$' -bench=BenchmarkMCPFirstToolAnswer -benchtime=40x ./integration/
func BenchmarkMCPFirstToolAnswer(b *testing.B) {
	e := &env{}
	root, err := os.MkdirTemp("", "cmb")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(root)
	e.daemonDir, e.configDir = filepath.Join(root, "d"), filepath.Join(root, "c")
	for _, dir := range []string{e.daemonDir, e.configDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	daemon := exec.Command(binPath, "daemon", "up", "--foreground", "--no-tcp")
	daemon.Env = e.environ()
	if err := daemon.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = daemon.Process.Kill(); _ = daemon.Wait() }()
	c := unixClient(e.socket())
	wait.For(b, startDeadline, "the daemon to answer", func() bool {
		st, _, err := getJSON(c, "http://localhost/v1/version", nil)
		return err == nil && st == http.StatusOK
	})
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	registered := "GODEBUG=" + awakeSetting
	variants := []struct {
		name string
		args []string
		env  string
	}{
		{"claudemesh_mcp_lean", []string{mcpBinPath, "--name", "bench"}, registered},
		{"claudemesh_mcp", []string{binPath, "mcp", "--name", "bench"}, registered},
		{"claudemesh_mcp_lean_reexec", []string{mcpBinPath, "--name", "bench"}, "GODEBUG="},
	}
	took := make([][]time.Duration, len(variants))
	b.ResetTimer()
	for range b.N {
		for i, v := range variants {
			cmd := exec.Command(v.args[0], v.args[1:]...)
			cmd.Env = append(e.environ(), v.env)
			ctx, cancel := context.WithTimeout(context.Background(), mcpDeadline)
			start := time.Now()
			cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				b.Fatal(err)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "check_messages", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				b.Fatalf("%s check_messages: %v %v", v.name, err, res)
			}
			took[i] = append(took[i], time.Since(start))
			_ = cs.Close()
			cancel()
		}
	}
	b.StopTimer()
	for i, v := range variants {
		reportPercentiles(b, v.name, took[i])
	}
}
