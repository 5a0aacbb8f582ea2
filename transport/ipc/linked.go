package ipc

import (
	"context"
	"errors"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// LinkWait is how long WhenLinked waits for a broker connection the daemon
// says is not up: a session's connection is dialled when it registers, so
// the session's first call may come before it.
const LinkWait = 3 * time.Second

// WhenLinked runs call, and again while the daemon answers
// broker_unavailable, for up to LinkWait (within ctx), backing off from
// 25 to 400 ms. Only reads, and writes that are safe to repeat, go through
// it: a write the link dropped may have been done (a lock's acquire
// repeated by its holder extends the same grant, a release repeated
// releases nothing more, a presence set again is the same presence).
func WhenLinked[T any](ctx context.Context, call func() (T, error)) (T, error) {
	deadline := time.Now().Add(LinkWait)
	for wait := 25 * time.Millisecond; ; wait = min(2*wait, 400*time.Millisecond) {
		res, err := call()
		var me *messages.Error
		if err == nil || !errors.As(err, &me) || me.Code != messages.CodeBrokerUnavailable || time.Now().Add(wait).After(deadline) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(wait): // the connection's dial is not observable through the API; the daemon is asked again
		}
	}
}
