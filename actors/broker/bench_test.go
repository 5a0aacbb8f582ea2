package broker

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// BenchmarkBrokerSend measures accepted sends per second through the
// WebSocket with dedupe on: 16 connections, unique ids, DMs to a member
// that is connected (every send is also pushed and client_acked).
//
//	CLAUDEMESH_TEST_POSTGRES_URL=… go test -run='^$' -bench=BenchmarkBrokerSend -benchtime=40000x ./actors/broker/
func BenchmarkBrokerSend(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			opts := broker.Options{Dir: b.TempDir()}
			if backend == "postgres" {
				opts = broker.Options{DatabaseURL: brokertest.PostgresURL(b)}
			}
			benchSends(b, startBroker(b, opts, noLimit), 16)
		})
	}
}

func benchSends(b *testing.B, e *env, conns int) {
	alice, bob := e.member("alice"), e.member("bob")
	receiver := e.connect(bob, "bob")
	receiver.ws.SetReadDeadline(time.Time{})
	var received atomic.Int64
	go func() { // bob acks every push, as a daemon does
		for {
			var f map[string]any
			if err := receiver.ws.ReadJSON(&f); err != nil {
				return
			}
			if f["type"] == "push" && f["subtype"] != "system" {
				received.Add(1)
				receiver.ws.WriteJSON(map[string]any{"type": "client_ack", "clientMessageId": f["client_message_id"]})
			}
		}
	}()
	senders := make([]*client, conns)
	for i := range senders {
		senders[i] = e.connect(alice, fmt.Sprint("a", i))
		senders[i].ws.SetReadDeadline(time.Time{}) // the run may outlast connect's deadline
	}
	var next atomic.Int64
	start := time.Now()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, c := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// a window of 64 sends in flight per connection, like the dispatcher
			inflight := make(chan struct{}, 64)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					var f map[string]any
					if err := c.ws.ReadJSON(&f); err != nil {
						return
					}
					if f["type"] == "ack" {
						if f["code"] != float64(201) {
							b.Errorf("ack %v", f)
						}
						<-inflight
					}
				}
			}()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					break
				}
				inflight <- struct{}{}
				if err := c.ws.WriteJSON(sendFrame(fmt.Sprint("bench-", i), bob.id.PublicKeyHex(), "hello")); err != nil {
					b.Error(err)
					return
				}
			}
			for len(inflight) > 0 {
				time.Sleep(time.Millisecond) // poll interval: waits for the last acks
			}
			c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""))
			<-done
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "sends/s")
	b.ReportMetric(0, "ns/op")
}
