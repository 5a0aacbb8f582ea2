package broker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// BenchmarkWaitingRecipients is the relay poll's cost on PostgreSQL, which
// every replica pays every --relay-poll (2 s): one look at a window where
// nothing waits, over an empty queue and over a queue of 20,000 rows older
// than the window (half delivered, half for a recipient connected nowhere,
// which stay until it comes back). The look reads the window, not the
// backlog: two index range scans that touch 4 pages either way (EXPLAIN
// ANALYZE); what the backlog adds is planning over its statistics.
//
//	CLAUDEMESH_TEST_POSTGRES_URL=postgres://… go test -run='^$' -bench=BenchmarkWaitingRecipients -benchtime=2000x ./persistence/broker/
func BenchmarkWaitingRecipients(b *testing.B) {
	for _, backlog := range []int{0, 20_000} {
		b.Run("backlog="+strconv.Itoa(backlog), func(b *testing.B) {
			e := openEnv(b, Options{DatabaseURL: brokertest.PostgresURL(b)})
			m := e.mesh(b, Mesh{})
			fillBacklog(b, e, m, backlog)
			e.clock.Advance(time.Hour)
			ctx := context.Background()
			until := e.clock.Now().Add(-2 * time.Second)
			if _, err := e.s.db.ExecContext(ctx, "ANALYZE delivery_queue"); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				ws, err := e.s.WaitingRecipients(ctx, until.Add(-12*time.Second), until)
				if err != nil || len(ws) != 0 {
					b.Fatalf("look: %v, %d waiting", err, len(ws))
				}
			}
		})
	}
}

// fillBacklog accepts n DMs: the even ones to a member never connected
// (left unclaimed), the odd ones pushed to another and acknowledged.
func fillBacklog(b *testing.B, e *env, m *Mesh, n int) {
	b.Helper()
	alice, away, here := e.join(b, m, "alice"), e.join(b, m, "away"), e.join(b, m, "here")
	ctx := context.Background()
	for start := 0; start < n; start += 64 {
		reqs := make([]*AcceptRequest, 0, 64)
		for i := start; i < min(start+64, n); i++ {
			r := dm(m, alice, away, "backlog-"+strconv.Itoa(i), "ciphertext")
			if i%2 == 1 {
				r = dm(m, alice, here, "backlog-"+strconv.Itoa(i), "ciphertext")
				r.Online, r.Lease = []string{here.Pubkey}, time.Minute
			}
			reqs = append(reqs, r)
		}
		var acks []Ack
		for i, res := range e.s.AcceptBatch(ctx, reqs) {
			if res.Outcome != Created {
				b.Fatalf("accept: %d (%v)", res.Outcome, res.Err)
			}
			if reqs[i].Online != nil {
				acks = append(acks, Ack{MeshID: m.ID, RecipientPubkeys: []string{here.Pubkey}, BrokerMessageID: res.BrokerMessageID})
			}
		}
		if _, err := e.s.AckDeliveries(ctx, acks); err != nil {
			b.Fatal(err)
		}
	}
}
