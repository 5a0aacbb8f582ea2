package actors

import (
	"fmt"
	"net/http"
	"slices"
	"time"

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

// parked are requests refused for now and waiting to be sent again, by
// what they wait for (a lock, a repository); the zero value is ready. A
// request leaves when what it waits for is released (take), when its own
// timer fires (remove), or when the link ends (drain).
type parked[K comparable, C comparable] struct{ by map[K][]C }

// park adds c under k and returns when to try it again: at the first of
// the expiries (RFC 3339, those of what is in its way) or after limit,
// never past deadline.
func (p *parked[K, C]) park(k K, c C, limit time.Duration, deadline time.Time, expiries ...string) time.Duration {
	if p.by == nil {
		p.by = map[K][]C{}
	}
	p.by[k] = append(p.by[k], c)
	for _, e := range expiries {
		if exp, err := time.Parse(time.RFC3339Nano, e); err == nil {
			limit = min(limit, max(time.Until(exp), 0)+5*time.Millisecond)
		}
	}
	return min(limit, time.Until(deadline))
}

// take removes and returns every request parked under k.
func (p *parked[K, C]) take(k K) []C {
	out := p.by[k]
	delete(p.by, k)
	return out
}

// remove removes c from under k and reports whether it was there (false:
// a release already sent it again).
func (p *parked[K, C]) remove(k K, c C) bool {
	i := slices.Index(p.by[k], c)
	if i < 0 {
		return false
	}
	p.by[k] = slices.Delete(p.by[k], i, i+1)
	if len(p.by[k]) == 0 {
		delete(p.by, k)
	}
	return true
}

// drain removes and returns every parked request.
func (p *parked[K, C]) drain() []C {
	var out []C
	for k, cs := range p.by {
		out = append(out, cs...)
		delete(p.by, k)
	}
	return out
}
