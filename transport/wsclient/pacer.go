package wsclient

import "time"

// Send pacing (issue 19, item 4).
const (
	// PaceInitialWindow is how many sends a fresh connection may have
	// awaiting their ack: the window grows by one per accepted send, up to
	// the caller's maximum (slow start), so that a broker with a small
	// burst allowance refuses a handful of a backlog's first sends, not
	// hundreds.
	PaceInitialWindow = 16
	// PaceMinGap: a gap that shrinks below it ends the pacing.
	PaceMinGap = time.Millisecond
	// PaceMaxGap bounds the interval between two paced sends.
	PaceMaxGap = 30 * time.Second
	// paceSpeedup: every accepted paced send shortens the gap by 1/32 of
	// itself (about 22 accepts halve it); a refusal doubles it.
	paceSpeedup = 32
)

// Pacer decides when one mesh connection may send, from the broker's rate
// limit refusals (a `rate_limit` ack, ours with a retry-after, upstream's
// without). A refusal pauses the whole connection: until the retry-after
// when the broker gave one, else for the reconnect schedule's jittered
// 0.5 s doubling to 30 s (Backoff; an accepted send resets it). From the
// first refusal on, sends go one at a time (the next waits for the last
// one's answer, so that a refusal never overtakes a later send of the same
// destination) and at least a gap apart: first the pause divided by what
// was accepted before it (a broker that takes 60 a minute in a burst and
// then asks for 60 s gets one a second), then shortened by 1/32 per
// accepted send and doubled per refusal, so that the pace settles just
// under what the broker accepts. A gap that shrinks below PaceMinGap ends
// the pacing. On a serial connection (LinkUp) the window stays at one
// send. Not safe for concurrent use (the dispatcher owns it).
type Pacer struct {
	backoff   *Backoff
	maxWindow int
	serial    bool          // the connection's sends go one at a time (LinkUp)
	window    int           // sends that may await their answer
	gap       time.Duration // least interval between two sends; 0: not paced
	last      time.Time     // the last send
	until     time.Time     // no send before this (the pause)
	pausedAt  time.Time     // the last counted refusal: earlier sends' refusals are not news
	accepted  int           // sends accepted since the last counted refusal (or the start)
	refusals  int64         // counted refusals in all
}

// NewPacer returns a pacer for a connection that may have up to maxWindow
// sends awaiting their ack; rnd jitters the pauses (nil: math/rand/v2).
func NewPacer(maxWindow int, rnd func() float64) *Pacer {
	return &Pacer{backoff: NewBackoff(rnd), maxWindow: maxWindow, window: min(PaceInitialWindow, maxWindow)}
}

// LinkUp starts a new connection: an unpaced one starts its window over;
// a pause and a pace carry over (the broker's limit outlives a connection).
// A serial connection keeps its window at one send for its whole life,
// paced or not: its broker may handle two frames of one connection in
// either order (upstream's runs each frame's handler without waiting for
// the previous one), so that two sends in flight together could be stored
// and delivered in the other order.
func (p *Pacer) LinkUp(serial bool) {
	p.serial = serial
	switch {
	case serial:
		p.window = 1
	case p.gap == 0:
		p.window = min(PaceInitialWindow, p.maxWindow)
	}
}

// Wait says whether a send may go out at now with inflight sends awaiting
// their answer: ready, or the time to wait (zero when only an answer can
// free the window).
func (p *Pacer) Wait(now time.Time, inflight int) (ready bool, wait time.Duration) {
	switch {
	case inflight >= p.window:
		return false, 0
	case now.Before(p.until):
		return false, p.until.Sub(now)
	case p.gap > 0 && now.Before(p.last.Add(p.gap)):
		return false, p.last.Add(p.gap).Sub(now)
	}
	return true, 0
}

// Sent records a send going out at now.
func (p *Pacer) Sent(now time.Time) { p.last = now }

// Accepted records an accepted send.
func (p *Pacer) Accepted() {
	p.backoff.Reset()
	p.accepted++
	switch {
	case p.gap > 0:
		p.gap -= p.gap / paceSpeedup
		if p.gap < PaceMinGap {
			p.gap = 0
		}
	case p.window < p.maxWindow && !p.serial:
		p.window++
	}
}

// Refused records a rate-limit refusal at now of a send that went out at
// sent, with the broker's retry-after (0: none given). It reports whether
// the refusal counted: that of a send that went out before the last
// counted refusal (or at its instant) tells nothing new — it was in
// flight already — and changes nothing.
func (p *Pacer) Refused(now, sent time.Time, retryAfter time.Duration) bool {
	if !sent.After(p.pausedAt) {
		return false
	}
	pause := retryAfter
	if pause <= 0 {
		pause = p.backoff.Next()
	}
	if p.gap == 0 {
		p.gap = pause / time.Duration(max(p.accepted, 1))
	} else {
		p.gap *= 2
	}
	p.gap = min(max(p.gap, 2*PaceMinGap), PaceMaxGap)
	p.window, p.accepted, p.refusals = 1, 0, p.refusals+1
	p.pausedAt, p.until = now, now.Add(pause)
	return true
}

// PaceState is what a Pacer reports (GET /v1/health, daemon status).
type PaceState struct {
	PausedUntil time.Time     // zero: not paused
	Gap         time.Duration // 0: not paced
	Window      int
	Refusals    int64 // counted refusals in all
}

// State reports the pacer at now.
func (p *Pacer) State(now time.Time) PaceState {
	s := PaceState{Gap: p.gap, Window: p.window, Refusals: p.refusals}
	if now.Before(p.until) {
		s.PausedUntil = p.until
	}
	return s
}
