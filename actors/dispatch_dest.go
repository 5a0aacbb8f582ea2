package actors

import (
	"encoding/json"
	"math/rand/v2"
	"time"

	"github.com/claudemesh/claudemesh-go/persistence"
)

// destWait is one destination the broker answered `no connected peer` for
// (the upstream broker refuses a DM to a member with no live connection
// rather than queue it): its rows wait out a backoff of their own —
// persistence.Backoff of the refusals in a row — while other
// destinations keep flowing. When it ends, one row goes as a probe; the
// destination's other rows stay held until the probe's answer.
type destWait struct {
	until    time.Time
	failures int
	probing  bool
}

// What destGate says of a held row.
const (
	destSend  = iota // send it (a destination not backing off, or the probe)
	destHold         // keep it held: its destination's probe is out
	destDefer        // give it back to the store until the backoff ends
)

// destGate decides a held row's fate by its destination's backoff. The
// destination is read from the payload only while some destination backs
// off, so that the common case parses nothing.
func (d *Dispatcher) destGate(f *flight, now time.Time) (gate int, until time.Time) {
	if len(d.dests) == 0 {
		return destSend, time.Time{}
	}
	dest := targetOf(f.row.Payload)
	w, ok := d.dests[dest]
	switch {
	case !ok:
		return destSend, time.Time{}
	case now.Before(w.until):
		return destDefer, w.until
	case w.probing:
		return destHold, time.Time{}
	}
	w.probing, f.probe = true, dest
	return destSend, time.Time{}
}

// destRefused records a `no connected peer` refusal of f and returns when
// its destination's rows are due again.
func (d *Dispatcher) destRefused(f *flight, now time.Time) time.Time {
	d.metrics.Refused.WithLabelValues(d.mesh, "no_connected_peer").Inc()
	dest := targetOf(f.row.Payload)
	w := d.dests[dest]
	if w == nil {
		w = &destWait{}
		d.dests[dest] = w
	}
	w.failures++
	w.until = now.Add(persistence.Backoff(w.failures, rand.Float64))
	return w.until
}

// destAccepted ends the backoff of an accepted send's destination.
func (d *Dispatcher) destAccepted(f *flight) {
	if len(d.dests) > 0 {
		delete(d.dests, targetOf(f.row.Payload))
	}
}

// probeEnded frees a destination's held rows once its probe is answered
// (a refusal has set the next backoff by then).
func (d *Dispatcher) probeEnded(f *flight) {
	if w := d.dests[f.probe]; w != nil {
		w.probing = false
	}
	f.probe = ""
}

// targetOf is a send frame's targetSpec ("" when the payload has none).
func targetOf(payload []byte) string {
	var f struct {
		TargetSpec string `json:"targetSpec"`
	}
	_ = json.Unmarshal(payload, &f) // a payload that is not a send frame has no destination to wait for
	return f.TargetSpec
}
