package integration

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// TestE2EReceiverKill9: bob's daemon is SIGKILLed while alice sends to it
// and a reader follows bob's events. Bob publishes a message's event as
// soon as its commit is visible and acks the broker after the fsync; a
// process's death keeps both the row and the event, and the broker pushes
// again what was not acked. After bob restarts, every message is in bob's
// inbox once, and the reader, resuming from the last event id it saw, gets
// exactly the messages it had not seen.
func TestE2EReceiverKill9(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)

	r := &chaosReader{t: t, peer: bob, seen: map[string]int{}}
	r.follow("")
	nSeen := func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.seen)
	}

	n := 0
	send := func(upTo int) error {
		for ; n < upTo; n++ {
			id := fmt.Sprintf("rk-%04d", n)
			if st, body, err := trySend(alice.c, bob.pubkey, "sent across bob's kill -9: "+id, id); err != nil || st != http.StatusAccepted {
				return fmt.Errorf("send %s: status %d, %v: %s", id, st, err, body)
			}
		}
		return nil
	}
	var sendErr error
	var sender sync.WaitGroup
	sender.Go(func() { sendErr = send(300) })
	wait.For(t, e2eDeliverDeadline, "bob's reader to see 100 messages", func() bool { return nSeen() >= 100 })
	bob.d.kill9()
	sender.Wait()
	if sendErr == nil {
		sendErr = send(400) // queued at alice while bob is down
	}
	if sendErr != nil {
		t.Fatal(sendErr)
	}
	r.mu.Lock()
	mark, atKill := r.lastID, len(r.seen)
	r.mu.Unlock()
	t.Logf("bob SIGKILLed after its reader saw %d messages (last event id %d)", atKill, mark)

	r.restarted() // bob again, and the reader resumes after the last id it saw
	all := map[string]bool{}
	for i := range 400 {
		all[fmt.Sprintf("rk-%04d", i)] = true
	}
	r.sawEachOnce(m, reachedOnce(t, m, bob, all))
}
