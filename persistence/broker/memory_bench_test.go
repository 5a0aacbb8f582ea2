package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// BenchmarkRecall is a recall over 100,000 memories of one mesh: two or
// three words drawn, like the memories' own, from a Zipf distribution over
// a 20,000-word vocabulary (so some queries name words most memories
// have), a quarter with a tag filter. It reports the p50 and p99 latency.
//
//	CLAUDEMESH_TEST_POSTGRES_URL=postgres://… go test -run='^$' -bench=BenchmarkRecall -benchtime=2000x ./persistence/broker/
func BenchmarkRecall(b *testing.B) {
	const memories = 100_000
	for _, backend := range []string{sqliteName, postgresName} {
		// The memories are made once per backend and kept by the parent:
		// each run of a sub-benchmark (the first with b.N = 1) ends with
		// the cleanups it registered.
		var e *env
		var m *Mesh
		words := newWordSource(1)
		b.Run(backend, func(sub *testing.B) {
			if e == nil {
				opts := Options{Dir: b.TempDir()}
				if backend == postgresName {
					opts = Options{DatabaseURL: brokertest.PostgresURL(b)}
				}
				e = openEnv(b, opts)
				m = e.mesh(b, Mesh{})
				fillMemories(sub, e, m.ID, memories, func(i int) string { return words.sentence(10 + i%31) })
			}
			b := sub
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				q := RecallQuery{Query: words.sentence(2 + i%2)}
				if i%4 == 0 {
					q.Tags = []string{"tag" + strconv.Itoa(i%8)}
				}
				start := time.Now()
				if _, err := e.s.Recall(ctx, m.ID, q); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// wordSource draws words of a 20,000-word vocabulary, Zipf-distributed.
type wordSource struct{ z *rand.Zipf }

func newWordSource(seed uint64) *wordSource {
	return &wordSource{z: rand.NewZipf(rand.New(rand.NewPCG(seed, seed)), 1.1, 1, 19_999)}
}

func (w *wordSource) sentence(n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = "w" + strconv.FormatUint(w.z.Uint64(), 36)
	}
	return strings.Join(out, " ")
}

// fillMemories inserts n memories, the ith with content(i) and one of
// eight tags, in transactions of 5,000 rows.
func fillMemories(b testing.TB, e *env, meshID string, n int, content func(i int) string) {
	b.Helper()
	ctx := context.Background()
	const batch = 5000
	for start := 0; start < n; start += batch {
		tx, err := e.s.db.BeginTxx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		stmt, err := tx.PreparexContext(ctx, e.s.d.rewrite(`INSERT INTO memory (id, mesh_id, content, tags, remembered_by,
			remembered_by_name, remembered_at) VALUES (?, ?, ?, ?, ?, ?, ?)`))
		if err != nil {
			b.Fatal(err)
		}
		for i := start; i < min(start+batch, n); i++ {
			if _, err := stmt.ExecContext(ctx, newTopicID(), meshID, content(i),
				fmt.Sprintf(`["tag%d"]`, i%8), strings.Repeat("a", 64), "bench", e.s.d.time(e.clock.Now())); err != nil {
				b.Fatal(err)
			}
		}
		stmt.Close()
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	if e.s.d.name == postgresName {
		if _, err := e.s.db.ExecContext(ctx, "ANALYZE memory"); err != nil {
			b.Fatal(err)
		}
	}
}
