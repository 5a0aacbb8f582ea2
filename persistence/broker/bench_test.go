package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// acceptBatch is the size of the benchmarks' AcceptBatch calls.
const acceptBatch = 64

// BenchmarkAcceptBatch is the store's accept ceiling: DMs with unique ids
// and one recipient each, 64 per AcceptBatch (one transaction, a savepoint
// per request), from 1 or 4 concurrent callers (4: several broker replicas
// on one PostgreSQL; on SQLite they queue for the one writer); and one per
// AcceptBatch, as the accepts of one sender at a time come (its CPU per
// accept is what a daemon's embedded broker spends on each message of one
// agent's sends).
//
//	CLAUDEMESH_TEST_POSTGRES_URL=postgres://… go test -run='^$' -bench=BenchmarkAcceptBatch -benchtime=20000x ./persistence/broker/
func BenchmarkAcceptBatch(b *testing.B) {
	for _, backend := range []string{sqliteName, postgresName} {
		for _, c := range []struct{ batch, callers int }{{1, 1}, {acceptBatch, 1}, {acceptBatch, 4}} {
			b.Run(fmt.Sprintf("%s/batch=%d/callers=%d", backend, c.batch, c.callers), func(b *testing.B) {
				e := benchEnv(b, backend)
				m := e.mesh(b, Mesh{})
				alice, bob := e.join(b, m, "alice"), e.join(b, m, "bob")
				runAccepts(b, e, c.batch, c.callers, func(i int64) *AcceptRequest {
					return dm(m, alice, bob, "bench-"+strconv.FormatInt(i, 10), "ciphertext")
				})
			})
		}
	}
}

// BenchmarkAcceptToSession is what the recipient of a DM costs the
// accept: a member; a session the hub knows (connected to this broker,
// mapped to its member: the common case); a session connected to another
// replica, which the accept looks up in mesh_session (one statement more
// per batch). 64 DMs per AcceptBatch, one caller.
//
//	CLAUDEMESH_TEST_POSTGRES_URL=postgres://… go test -run='^$' -bench=BenchmarkAcceptToSession -benchtime=20000x ./persistence/broker/
func BenchmarkAcceptToSession(b *testing.B) {
	for _, backend := range []string{sqliteName, postgresName} {
		for _, to := range []string{"member", "session-here", "session-elsewhere"} {
			b.Run(backend+"/to="+to, func(b *testing.B) {
				e := benchEnv(b, backend)
				m := e.mesh(b, Mesh{})
				alice, bob := e.join(b, m, "alice"), e.join(b, m, "bob")
				session := &Member{Pubkey: newPubkey(b)}
				if err := e.s.ConnectSession(context.Background(), SessionConn{MeshID: m.ID, SessionPubkey: session.Pubkey,
					MemberPubkey: bob.Pubkey, Replica: "elsewhere", ConnID: "conn-1"}, time.Hour); err != nil {
					b.Fatal(err)
				}
				runAccepts(b, e, acceptBatch, 1, func(i int64) *AcceptRequest {
					id := "bench-" + strconv.FormatInt(i, 10)
					switch to {
					case "session-here":
						r := dm(m, alice, session, id, "ciphertext")
						r.SessionMembers = map[string]string{session.Pubkey: bob.Pubkey}
						return r
					case "session-elsewhere":
						return dm(m, alice, session, id, "ciphertext")
					}
					return dm(m, alice, bob, id, "ciphertext")
				})
			})
		}
	}
}

func benchEnv(b *testing.B, backend string) *env {
	opts := Options{Dir: b.TempDir()}
	if backend == postgresName {
		opts = Options{DatabaseURL: brokertest.PostgresURL(b)}
	}
	return openEnv(b, opts)
}

// runAccepts accepts b.N requests made by req, batch per AcceptBatch, from
// callers goroutines, and reports accepts/s and the benchmark process's
// CPU per accept (on PostgreSQL the server's is not in it); every one
// must be created.
func runAccepts(b *testing.B, e *env, batch, callers int, req func(i int64) *AcceptRequest) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var before, after syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &before); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range callers {
		wg.Go(func() {
			reqs := make([]*AcceptRequest, 0, batch)
			for {
				start := next.Add(int64(batch)) - int64(batch)
				if start >= int64(b.N) {
					return
				}
				reqs = reqs[:0]
				for i := start; i < start+int64(batch) && i < int64(b.N); i++ {
					reqs = append(reqs, req(i))
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
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &after); err != nil {
		b.Fatal(err)
	}
	cpu := after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "accepts/s")
	b.ReportMetric(float64(cpu)/1e3/float64(b.N), "cpu-µs/accept")
}

// BenchmarkAcceptWALPages is what one DM accepted alone (a batch of one,
// as at one sender's pace) writes to SQLite's WAL: the pages of every
// table and index the accept touches, counted by the log's frames after
// runs of acceptWALRun accepts on an emptied log (a passive checkpoint
// reports them; no automatic checkpoint runs within a run).
//
//	go test -run='^$' -bench=BenchmarkAcceptWALPages -benchtime=2000x ./persistence/broker/
func BenchmarkAcceptWALPages(b *testing.B) {
	const acceptWALRun = 50
	e := benchEnv(b, sqliteName)
	m := e.mesh(b, Mesh{})
	alice, bob := e.join(b, m, "alice"), e.join(b, m, "bob")
	ctx := context.Background()
	frames := func(mode string) int {
		var busy, log, done int
		if err := e.s.db.QueryRowxContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &log, &done); err != nil {
			b.Fatal(err)
		}
		return log
	}
	total := 0
	b.ResetTimer()
	for i := 0; i < b.N; {
		frames("TRUNCATE")
		n := min(acceptWALRun, b.N-i)
		for range n {
			r := e.s.AcceptBatch(ctx, []*AcceptRequest{dm(m, alice, bob, "wal-"+strconv.Itoa(i), "a ciphertext of some hundred bytes, as a short message seals to")})
			if r[0].Outcome != Created {
				b.Fatalf("accept: %d (%v)", r[0].Outcome, r[0].Err)
			}
			i++
		}
		total += frames("PASSIVE")
	}
	b.StopTimer()
	b.ReportMetric(float64(total)/float64(b.N), "wal-pages/accept")
}
