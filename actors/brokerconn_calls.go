package actors

import (
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// reqCalls are a relay's requests in flight, by the _reqId each was sent
// with (prefix-N, the prefix its relayRoutes.ids); the zero value is ready. The
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

// asks are the requests in flight of a relay that answers each caller
// once: who asked, and what.
type asks[Q any] struct{ reqCalls[*ask[Q]] }

// ask is one request in flight.
type ask[Q any] struct {
	who *actor.PID
	req Q
}

// ask records who asked req under a new id and returns the id.
func (a *asks[Q]) ask(prefix string, who *actor.PID, req Q) string {
	return a.call(prefix, &ask[Q]{who: who, req: req})
}

// answer sends the caller of id its reply and reports whether there was
// one (none: already answered).
func (a *asks[Q]) answer(ctx actor.Context, id string, reply any) bool {
	call, ok := a.take(id)
	if ok {
		ctx.Send(call.who, reply)
	}
	return ok
}

// answerAll sends every caller in flight the reply fail makes: the link is
// gone.
func (a *asks[Q]) answerAll(ctx actor.Context, fail func() any) {
	for _, call := range a.drain() {
		ctx.Send(call.who, fail())
	}
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

// count is how many requests are parked.
func (p *parked[K, C]) count() int {
	n := 0
	for _, cs := range p.by {
		n += len(cs)
	}
	return n
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
