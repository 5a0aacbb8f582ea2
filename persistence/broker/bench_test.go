package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// BenchmarkAcceptBatch is the store's accept ceiling: DMs with unique ids
// and one recipient each, 64 per AcceptBatch (one transaction, a savepoint
// per request), from 1 or 4 concurrent callers (4: several broker replicas
// on one PostgreSQL; on SQLite they queue for the one writer).
//
//	CLAUDEMESH_TEST_POSTGRES_URL=postgres://… go test -run='^$' -bench=BenchmarkAcceptBatch -benchtime=20000x ./persistence/broker/
func BenchmarkAcceptBatch(b *testing.B) {
	const batch = 64
	for _, backend := range []string{sqliteName, postgresName} {
		for _, callers := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/batch=%d/callers=%d", backend, batch, callers), func(b *testing.B) {
				opts := Options{Dir: b.TempDir()}
				if backend == postgresName {
					opts = Options{DatabaseURL: brokertest.PostgresURL(b)}
				}
				e := openEnv(b, opts)
				m := e.mesh(b, Mesh{})
				alice, bob := e.join(b, m, "alice"), e.join(b, m, "bob")
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				for range callers {
					wg.Go(func() {
						reqs := make([]*AcceptRequest, 0, batch)
						for {
							start := next.Add(batch) - batch
							if start >= int64(b.N) {
								return
							}
							reqs = reqs[:0]
							for i := start; i < start+batch && i < int64(b.N); i++ {
								reqs = append(reqs, dm(m, alice, bob, "bench-"+strconv.FormatInt(i, 10), "ciphertext"))
							}
							for _, r := range e.s.AcceptBatch(context.Background(), reqs) {
								if r.Outcome != Created {
									b.Errorf("accept: %d (%v)", r.Outcome, r.Err)
									return
								}
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "accepts/s")
			})
		}
	}
}
