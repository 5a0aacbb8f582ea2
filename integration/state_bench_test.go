package integration

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// BenchmarkStateRoundTrip: a state set and a get, each a round trip from
// an IPC client through the daemon (its broker connection actor) to the
// broker over a loopback WebSocket and back; the daemon's embedded broker
// on SQLite, as `claudemesh daemon up` runs it with no mesh joined. Each
// reports p50 and p99 in ms.
func BenchmarkStateRoundTrip(b *testing.B) {
	e := benchHookEnv(b)
	stop := benchDaemon(b, e)
	defer stop()
	c := ipc.NewClient(e.socket())
	ctx := context.Background()
	set := func(i int) error {
		_, err := c.SetState(ctx, &messages.StateSetRequest{Key: "bench", Value: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)})
		return err
	}
	// The daemon's broker connection comes up after its IPC does.
	var err error
	if werr := wait.Until(startDeadline, "a state set", func() bool { err = set(0); return err == nil }); werr != nil {
		b.Fatalf("%v: %v", werr, err)
	}
	sets, gets := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if err := set(i); err != nil {
			b.Fatal(err)
		}
		sets = append(sets, time.Since(start))
		start = time.Now()
		got, err := c.State(ctx, "", "bench")
		if err != nil {
			b.Fatal(err)
		}
		gets = append(gets, time.Since(start))
		if want := `{"n":` + strconv.Itoa(i) + `}`; string(got.State.Value) != want {
			b.Fatalf("got %s, want %s", got.State.Value, want)
		}
	}
	b.StopTimer()
	reportPercentiles(b, "state_set", sets)
	reportPercentiles(b, "state_get", gets)
}
