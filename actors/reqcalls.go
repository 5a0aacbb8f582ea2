package actors

import (
	"fmt"
	"net/http"

	"github.com/claudemesh/claudemesh-go/messages"
)

// reqCalls are a broker connection's requests of one kind in flight, by
// the _reqId each was sent with (prefix-N); the zero value is ready. The
// broker's answer, an error frame naming the id, the request's timer or
// the link's end takes the call, and whichever comes first answers it.
type reqCalls[C any] struct {
	pending map[string]C
	next    int
}

// call records c under a new id and returns the id.
func (r *reqCalls[C]) call(prefix string, c C) string {
	if r.pending == nil {
		r.pending = map[string]C{}
	}
	r.next++
	id := fmt.Sprintf("%s-%d", prefix, r.next)
	r.pending[id] = c
	return id
}

// take removes and returns the call of id (false: none, or already
// answered).
func (r *reqCalls[C]) take(id string) (C, bool) {
	c, ok := r.pending[id]
	delete(r.pending, id)
	return c, ok
}

// drain removes and returns every call in flight.
func (r *reqCalls[C]) drain() []C {
	out := make([]C, 0, len(r.pending))
	for id, c := range r.pending {
		out = append(out, c)
		delete(r.pending, id)
	}
	return out
}

// refusedInput is the 400 of a request the broker refused as invalid, under
// the daemon's code for it.
func refusedInput(code string, f *messages.ErrorFrame) *messages.Error {
	return &messages.Error{Status: http.StatusBadRequest, Code: code, Detail: "the broker refused it: " + f.Message}
}

// brokerRefused is the 502 of a refusal a relay has no answer of its own
// for.
func (b *BrokerConn) brokerRefused(f *messages.ErrorFrame) *messages.Error {
	return &messages.Error{Status: http.StatusBadGateway, Code: "broker_refused",
		Detail: fmt.Sprintf("the broker of mesh %s answered %s: %s", b.cfg.Slug, f.Code, f.Message)}
}
