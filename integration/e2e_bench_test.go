package integration

import (
	"strconv"
	"testing"
)

// BenchmarkE2E measures delivery through real processes — a broker on
// SQLite and two daemons, alice → broker → bob — through
// `claudemesh bench --mode e2e --self-contained`: each message is timed
// from alice's POST /v1/send to its `message` event on bob's /v1/events.
//
//	go test -run='^$' -bench=BenchmarkE2E -benchtime=10000x ./integration/
//
// "paced" offers 1,000 msgs/s and reports the latency percentiles;
// "throughput" sends as fast as 64 clients can and reports delivered
// msgs/s; "paced-batched_50ms" is "paced" with the daemons' [outbox]
// fsync_mode = "batched_50ms" (the 202 does not wait for alice's fsync).
// Each fails on a message lost or delivered twice.
func BenchmarkE2E(b *testing.B) {
	for _, mode := range []struct {
		name  string
		rate  int
		fsync string // the daemons' [outbox] fsync_mode ("": strict)
	}{{"paced", 1000, ""}, {"throughput", 0, ""}, {"paced-batched_50ms", 1000, "batched_50ms"}} {
		b.Run(mode.name, func(b *testing.B) {
			args := []string{"--mode", "e2e", "--self-contained", "--clients", "64", "--count", strconv.Itoa(b.N),
				"--size", "16"}
			if mode.rate > 0 {
				args = append(args, "--rate", strconv.Itoa(mode.rate))
			}
			if mode.fsync != "" {
				args = append(args, "--fsync-mode", mode.fsync)
			}
			rep := benchJSON(b, args...)
			if rep.Lost > 0 || rep.Duplicates > 0 || len(rep.Errors) > 0 {
				b.Fatalf("lost %d, duplicates %d, errors %v", rep.Lost, rep.Duplicates, rep.Errors)
			}
			b.ReportMetric(rep.Throughput, "delivered/s")
			b.ReportMetric(rep.LatencyMs.P50, "p50-ms")
			b.ReportMetric(rep.LatencyMs.P99, "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
