package wsserver

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

type nopSession struct{}

func (nopSession) Frame([]byte) {}
func (nopSession) Closed(error) {}

// TestShutdownWaitsForUpgrades: clients connect while the server shuts
// down. Every upgrade that succeeded opened its session before Shutdown
// returned: an HTTP server's shutdown does not wait for the handler of a
// connection it handed over, and a session opened after Shutdown would
// outlive the broker's actors. Rounds of 100 concurrent dials, the
// shutdown begun as they start.
func TestShutdownWaitsForUpgrades(t *testing.T) {
	for range 20 {
		shutdownDuringUpgrades(t)
	}
}

func shutdownDuringUpgrades(t *testing.T) {
	var shut atomic.Bool
	var late atomic.Int32
	opened := make(chan struct{}, 1000)
	s := New(func(*Conn) Session {
		if shut.Load() {
			late.Add(1)
		}
		opened <- struct{}{}
		return nopSession{}
	}, func() any { return nil }, nil, Limits{HelloTimeout: time.Minute, Pending: 1000}, slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(s)
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
	var wg sync.WaitGroup
	var upgraded atomic.Int32
	start := make(chan struct{})
	for range 100 {
		wg.Go(func() {
			<-start
			ws, _, err := websocket.DefaultDialer.Dial(url, nil)
			if err == nil {
				upgraded.Add(1)
				ws.Close()
			}
		})
	}
	close(start)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	shut.Store(true)
	wg.Wait()
	for range upgraded.Load() { // each upgrade's session, whenever it opens
		select {
		case <-opened:
		case <-ctx.Done():
			t.Fatal("an upgraded connection never opened its session")
		}
	}
	if n := late.Load(); n > 0 {
		t.Fatalf("%d sessions opened after Shutdown returned (%d upgrades)", n, upgraded.Load())
	}
}
