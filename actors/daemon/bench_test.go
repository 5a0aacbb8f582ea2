package daemon_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchClients is the number of concurrent IPC clients of the accept
// benchmarks, the daemon's in-flight limit.
const benchClients = 64

// BenchmarkAccept drives POST /v1/send over the Unix socket with 64
// concurrent clients and unique ids: durable accepts (synchronous=FULL)
// per second, and the latency percentiles seen by the clients.
//
//	go test -run='^$' -bench=BenchmarkAccept -benchtime=100000x ./actors/daemon/
func BenchmarkAccept(b *testing.B) {
	for _, to := range []string{"#bench", "dm"} {
		b.Run("to="+to, func(b *testing.B) {
			h := startDaemon(b)
			target := benchTopic
			if to == "dm" {
				target = h.pubkey
			}
			lat := runAccepts(b, h, target, b.N, 0)
			report(b, lat)
		})
	}
}

// BenchmarkAcceptPaced offers accepts at a fixed rate (open loop, 64
// clients) and reports the latency percentiles at that rate.
//
//	go test -run='^$' -bench=BenchmarkAcceptPaced -benchtime=25000x ./actors/daemon/
func BenchmarkAcceptPaced(b *testing.B) {
	h := startDaemon(b)
	report(b, runAccepts(b, h, benchTopic, b.N, 5000))
}

// benchTopic is a topic id (the daemon passes a #<id> to the broker as it
// is; a #name would need the broker to resolve it).
const benchTopic = "#benchTopic00000000000000000000"

// runAccepts sends n unique accepts from benchClients goroutines, paced at
// rate per second when rate > 0, and returns each request's latency.
func runAccepts(b *testing.B, h *harness, to string, n, rate int) []time.Duration {
	var next atomic.Int64
	lat := make([]time.Duration, n)
	start := time.Now()
	run := fmt.Sprintf("%d", start.UnixNano())
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := 0; w < benchClients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := new(bytes.Buffer)
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				sent := time.Now()
				if rate > 0 {
					sent = start.Add(time.Duration(i) * time.Second / time.Duration(rate))
					time.Sleep(time.Until(sent))
				}
				body.Reset()
				fmt.Fprintf(body, `{"to":%q,"message":"benchmark message %d","client_message_id":"b-%s-%d"}`, to, i, run, i)
				resp, err := h.hc.Post("http://localhost/v1/send", "application/json", body)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
				lat[i] = time.Since(sent)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "accepts/s")
	return lat
}

func report(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(0, "ns/op")
}
