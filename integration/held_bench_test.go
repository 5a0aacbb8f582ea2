package integration

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// BenchmarkHeldPull measures what the pull of held messages adds to a
// session's inbox read, which check_messages is: a working session's
// GET /v1/inbox?unread_only=true (the pull through its broker link, then
// the listing) against the same read of the daemon's own membership (no
// pull), taking turns, on a daemon with its embedded broker and nothing
// held; then the session's read with one message held for it, which the
// pull pushes and the inbox stores before the listing (at most 200 runs).
// Beside them, check_messages as an agent calls it, through claudemesh-mcp
// (rawMCP), nothing held. Each reports its p50 and p99 in ms.
//
//	go test -run='^$' -bench=BenchmarkHeldPull -benchtime=2000x ./integration/
func BenchmarkHeldPull(b *testing.B) {
	e := benchHookEnv(b)
	stop := benchDaemon(b, e)
	defer stop()
	ctx := context.Background()
	reader := registerSession(b, e.socket(), "local", "bench-reader", "reader")
	writer := registerSession(b, e.socket(), "local", "bench-writer", "writer")
	working := messages.StatusWorking
	wait.For(b, e2eConnectDeadline, "the reader working, as the writer sees it", func() bool {
		if _, err := reader.c.SetProfile(ctx, &messages.SetProfile{Status: &working}); err != nil {
			return false
		}
		peers, err := writer.c.Peers(ctx, "")
		return err == nil && slices.ContainsFunc(peers, func(p ipc.MeshPeer) bool {
			return p.DisplayName == "reader" && p.Status == messages.StatusWorking
		})
	})
	operator := ipc.NewClient(e.socket())
	read := func(c *ipc.Client, q url.Values, want int) time.Duration {
		start := time.Now()
		page, err := c.Inbox(ctx, q)
		took := time.Since(start)
		if err != nil || len(page.Items) != want {
			b.Fatalf("GET /v1/inbox?%s: %+v %v, want %d messages", q.Encode(), page, err, want)
		}
		return took
	}
	agent := startRawMCP(b, e, "agent")
	wait.For(b, startDeadline, "the agent's first check_messages", func() bool { return agent.callTool("check_messages", map[string]any{}) == nil })
	check := func() time.Duration {
		start := time.Now()
		if err := agent.callTool("check_messages", map[string]any{}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	session, own := url.Values{"unread_only": {"true"}}, url.Values{"unread_only": {"true"}, "mesh": {"local"}}
	var pull, noPull, tool, held []time.Duration
	b.ResetTimer()
	for range b.N {
		pull = append(pull, read(reader.c, session, 0))
		noPull = append(noPull, read(operator, own, 0))
		tool = append(tool, check())
	}
	body := "held for the reader"
	for i := range min(b.N, 200) {
		id := fmt.Sprintf("held-bench-%d", i)
		if res, err := writer.c.Send(ctx, &messages.SendRequest{To: reader.pubkey, Message: &body, ClientMessageID: id}, ""); err != nil ||
			res.Accepted == nil {
			b.Fatalf("send %s: %+v %v", id, res, err)
		}
		wait.For(b, e2eDeliverDeadline, "the broker to take "+id, func() bool {
			row, err := writer.c.OutboxRow(ctx, "local", id)
			return err == nil && row != nil && row.Status == "done"
		})
		held = append(held, read(reader.c, session, 1))
	}
	b.StopTimer()
	reportPercentiles(b, "session_read_pull", pull)
	reportPercentiles(b, "membership_read_no_pull", noPull)
	reportPercentiles(b, "mcp_check_messages", tool)
	reportPercentiles(b, "session_read_one_held", held)
}
