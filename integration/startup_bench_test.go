package integration

import (
	"fmt"
	"strconv"
	"testing"
)

// BenchmarkStartup measures the real binary from exec to the first answer
// of GET /v1/version on the socket, with an empty outbox and with 100,000
// pending rows, and the daemon's resident memory once it serves — through
// `claudemesh bench --mode startup --self-contained`.
//
//	go test -run='^$' -bench=BenchmarkStartup -benchtime=10x ./integration/
func BenchmarkStartup(b *testing.B) {
	for _, rows := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("pending=%d", rows), func(b *testing.B) {
			rep := benchJSON(b, "--mode", "startup", "--self-contained", "--clients", "64", "--count", strconv.Itoa(b.N),
				"--pending", strconv.Itoa(rows), "--size", "300")
			b.ReportMetric(rep.LatencyMs.P50, "p50-ms")
			b.ReportMetric(rep.LatencyMs.Max, "max-ms")
			b.ReportMetric(rep.RSSMB, "rss-MB")
			b.ReportMetric(0, "ns/op")
		})
	}
}
