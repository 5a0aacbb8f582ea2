package persistence

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/hookoutbox"
)

// BenchmarkHookClaim is one claim of 25 rows (and their release) in a
// backlog of 20,000 rows of 8 sessions, of which the worker holds none or
// the oldest 1,000 (locked, in its queues): the walk past the held rows
// is the cost that grows with the queues.
//
//	go test -run='^$' -bench=BenchmarkHookClaim ./persistence/
func BenchmarkHookClaim(b *testing.B) {
	for _, held := range []int{0, 1000} {
		b.Run(fmt.Sprint("held=", held), func(b *testing.B) { benchHookClaim(b, held) })
	}
}

func benchHookClaim(b *testing.B, held int) {
	h, w := hooksDBB(b)
	const t0 = 5_000_000
	for i := range 20000 {
		row := hookoutbox.Row{SessionID: fmt.Sprint("s", i%8), Agent: "claude", EventType: "tool_use", Payload: []byte(`{"v":1}`)}
		if err := w.Append(context.Background(), row, time.UnixMilli(t0)); err != nil {
			b.Fatal(err)
		}
	}
	now := int64(t0 + 10)
	run := func(fn func(tx *Tx) error) {
		batch, err := h.Begin(context.Background())
		if err == nil {
			err = fn(batch.Tx())
		}
		if err == nil {
			err = batch.Commit()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if held > 0 {
		run(func(tx *Tx) error {
			_, err := h.Claim(tx, &messages.ClaimHooks{Now: now, Cutoff: now - 30_000, Limit: held})
			return err
		})
	}
	b.ResetTimer()
	for range b.N {
		run(func(tx *Tx) error {
			got, err := h.Claim(tx, &messages.ClaimHooks{Now: now, Cutoff: now - 30_000, Limit: 25})
			if err != nil || len(got.Rows) != 25 {
				return fmt.Errorf("claimed %d rows: %v", len(got.Rows), err)
			}
			out := &messages.FinishHooks{Now: now}
			for _, r := range got.Rows {
				out.Outcomes = append(out.Outcomes, messages.HookOutcome{ID: r.ID, Kind: messages.HookReleased})
			}
			_, err = h.Finish(tx, out)
			return err
		})
	}
}
