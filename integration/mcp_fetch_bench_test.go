package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
)

// fetchBenchMessages is how many messages BenchmarkMCPFetchInbox lists.
const fetchBenchMessages = 1000

// BenchmarkMCPFetchInbox: fetch_inbox of 1,000 unread messages (limit
// 1000, nothing marked read) through claudemesh-mcp, as an agent calls it:
// the tool call over stdio, GET /v1/inbox on the daemon (SQLite), the
// result's text and structured content back. The messages are sent to the
// session first, by the daemon's member through the embedded broker, each
// of about 120 bytes. It reports the call's p50 and p99 in ms.
//
//	go test -run='^$' -bench=BenchmarkMCPFetchInbox -benchtime=200x ./integration/
func BenchmarkMCPFetchInbox(b *testing.B) {
	e := benchHookEnv(b)
	stop := benchDaemon(b, e)
	defer stop()
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	reader := startRawMCP(b, e, "reader")
	if err := reader.callTool("check_messages", map[string]any{}); err != nil { // the session is registered
		b.Fatal(err)
	}
	for i := range fetchBenchMessages {
		msg := fmt.Sprintf("build %04d is green on linux-amd64; the flaky test in store_inbox passed twice, merging the branch next", i)
		body, _ := json.Marshal(&messages.SendRequest{To: "reader", Message: &msg, ClientMessageID: fmt.Sprintf("fetch-bench-%04d", i)})
		if err := wait.Until(e2eConnectDeadline, "the daemon to take a send to reader", func() bool {
			resp, err := c.Post("http://localhost/v1/send", "application/json", bytes.NewReader(body))
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusAccepted // reader resolves once the peer list has it
		}); err != nil {
			b.Fatal(err)
		}
	}
	fetch := func() string {
		r, err := reader.request("tools/call", map[string]any{"name": "fetch_inbox", "arguments": map[string]any{"limit": fetchBenchMessages}})
		if err != nil || r.Result.IsError || len(r.Result.Content) == 0 {
			b.Fatalf("fetch_inbox: %v %+v", err, r)
		}
		return r.Result.Content[0].Text
	}
	want := fmt.Sprintf("%d messages,", fetchBenchMessages)
	if err := wait.UntilEvery(e2eRecoveryDeadline, 100*time.Millisecond, "1,000 messages in reader's inbox", func() bool {
		return strings.HasPrefix(fetch(), want)
	}); err != nil {
		b.Fatal(err)
	}
	calls := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if got := fetch(); !strings.HasPrefix(got, want) {
			b.Fatalf("fetch_inbox: %.80q", got)
		}
		calls = append(calls, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, "fetch_inbox_1000", calls)
}
