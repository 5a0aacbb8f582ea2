package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
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
// result's text and structured content back (700 KB), read to its end but
// not decoded (rawMCP.callLine: the benchmark measures the server). The
// messages are sent to the session first, by the daemon's member through
// the embedded broker, each of about 120 bytes. It reports the call's p50
// and p99 in ms.
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
	// The answer's line, undecoded: its text begins with the count.
	want := []byte(fmt.Sprintf(`"result":{"content":[{"type":"text","text":"%d messages,`, fetchBenchMessages))
	fetch := func() []byte {
		line, err := reader.callLine("fetch_inbox", map[string]any{"limit": fetchBenchMessages})
		if err != nil {
			b.Fatalf("fetch_inbox: %v", err)
		}
		return line
	}
	if err := wait.UntilEvery(e2eRecoveryDeadline, 100*time.Millisecond, "1,000 messages in reader's inbox", func() bool {
		return bytes.Contains(fetch(), want)
	}); err != nil {
		b.Fatal(err)
	}
	calls := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if got := fetch(); !bytes.Contains(got[:min(len(got), 200)], want) {
			b.Fatalf("fetch_inbox: %.200s", got)
		}
		calls = append(calls, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, "fetch_inbox_1000", calls)
}
