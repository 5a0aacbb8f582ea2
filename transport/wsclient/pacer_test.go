package wsclient

import (
	"testing"
	"time"
)

// TestPacer walks a pacer through a broker's refusals on an injected clock:
// slow start, the pause (the broker's retry-after, else the jittered
// backoff), one send at a time at the learnt gap, refusals of sends already
// in flight changing nothing, the gap shortening per accept and doubling per
// refusal, and the end of the pacing.
func TestPacer(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	p := NewPacer(256, func() float64 { return 0.5 }) // no jitter
	if ready, _ := p.Wait(t0, PaceInitialWindow-1); !ready {
		t.Fatal("a fresh pacer holds back a send within its first window")
	}
	if ready, wait := p.Wait(t0, PaceInitialWindow); ready || wait != 0 {
		t.Fatalf("a full window: ready %v, wait %s; want an ack awaited", ready, wait)
	}
	for range 44 { // slow start: 16 + 44 = 60
		p.Sent(t0)
		p.Accepted()
	}
	if s := p.State(t0); s.Window != 60 || s.Gap != 0 || !s.PausedUntil.IsZero() {
		t.Fatalf("after 44 accepts: %+v; want window 60, not paced", s)
	}

	// Our broker: 60 accepted, then 429 with 59 s to the window's end.
	sent := t0
	if !p.Refused(t0, sent, 59*time.Second) {
		t.Fatal("the first refusal did not count")
	}
	if p.Refused(t0.Add(time.Millisecond), sent, 59*time.Second) {
		t.Fatal("the refusal of a send that went out before the pause counted")
	}
	s := p.State(t0)
	if want := t0.Add(59 * time.Second); !s.PausedUntil.Equal(want) || s.Window != 1 || s.Gap != 59*time.Second/44 || s.Refusals != 1 {
		t.Fatalf("after the refusal: %+v; want paused until %s, window 1, gap 59s/44, 1 refusal", s, want)
	}
	if ready, wait := p.Wait(t0.Add(time.Second), 0); ready || wait != 58*time.Second {
		t.Fatalf("during the pause: ready %v, wait %s; want 58s", ready, wait)
	}
	probe := t0.Add(59 * time.Second)
	if ready, _ := p.Wait(probe, 0); !ready {
		t.Fatal("the pause is over and the link is idle, but no probe may go")
	}
	p.Sent(probe)
	if ready, _ := p.Wait(probe, 1); ready {
		t.Fatal("a second send may go while the probe awaits its answer")
	}
	p.Accepted()
	gap := s.Gap - s.Gap/paceSpeedup
	if ready, wait := p.Wait(probe.Add(time.Millisecond), 0); ready || wait != gap-time.Millisecond {
		t.Fatalf("after the probe: ready %v, wait %s; want the gap %s less 1ms", ready, wait, gap)
	}

	// Upstream's broker: no retry-after; the backoff doubles per refusal
	// in a row and starts over after an accept; each refusal doubles the gap.
	later := probe.Add(time.Minute)
	for i, want := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second} {
		p.Sent(later)
		if !p.Refused(later, later, 0) {
			t.Fatalf("refusal %d did not count", i)
		}
		if s := p.State(later); !s.PausedUntil.Equal(later.Add(want)) || s.Gap != gap*2 {
			t.Fatalf("refusal %d: %+v; want paused %s, gap %s", i, s, want, gap*2)
		}
		gap *= 2
		later = later.Add(gap)
	}
	p.Accepted()
	p.Sent(later)
	p.Refused(later, later, 0)
	if s := p.State(later); !s.PausedUntil.Equal(later.Add(500 * time.Millisecond)) {
		t.Fatalf("after an accept the backoff did not start over: %+v", s)
	}

	// A broker that accepts everything again: the gap shrinks to nothing
	// and the window grows back.
	for range 1000 {
		p.Accepted()
	}
	if s := p.State(later.Add(time.Hour)); s.Gap != 0 || s.Window < 2 || !s.PausedUntil.IsZero() {
		t.Fatalf("after 1000 accepts: %+v; want no pacing and a growing window", s)
	}
	p.LinkUp(false)
	if s := p.State(later); s.Window != PaceInitialWindow {
		t.Fatalf("a new link of an unpaced pacer: window %d, want %d", s.Window, PaceInitialWindow)
	}
}

// TestPacerSerial: on a serial connection (a legacy broker, which may
// handle two frames of one connection in either order) one send at a time
// may await its answer, however many are accepted, paced or not; a
// connection that is not serial starts its window over.
func TestPacerSerial(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	p := NewPacer(256, func() float64 { return 0.5 })
	p.LinkUp(true)
	if ready, _ := p.Wait(t0, 0); !ready {
		t.Fatal("an idle serial connection may not send")
	}
	if ready, wait := p.Wait(t0, 1); ready || wait != 0 {
		t.Fatalf("a serial connection with a send in flight: ready %v, wait %s; want its answer awaited", ready, wait)
	}
	for range 100 {
		p.Accepted()
	}
	p.Refused(t0, t0.Add(time.Millisecond), 0)
	for range 1000 {
		p.Accepted()
	}
	if s := p.State(t0.Add(time.Hour)); s.Window != 1 || s.Gap != 0 {
		t.Fatalf("a serial connection after accepts, a pause and its pacing's end: %+v; want window 1, not paced", s)
	}
	p.LinkUp(false)
	if s := p.State(t0); s.Window != PaceInitialWindow {
		t.Fatalf("a connection that is not serial after a serial one: window %d, want %d", s.Window, PaceInitialWindow)
	}
}

// TestPacerGapBounds: the first gap is the pause over what was accepted
// before it, kept within [2 × PaceMinGap, PaceMaxGap].
func TestPacerGapBounds(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	for _, c := range []struct {
		accepted   int
		retryAfter time.Duration
		want       time.Duration
	}{
		{0, time.Minute, PaceMaxGap},
		{10, 500 * time.Millisecond, 50 * time.Millisecond},
		{1_000_000, time.Second, 2 * PaceMinGap},
	} {
		p := NewPacer(1<<30, nil)
		for range c.accepted {
			p.Accepted()
		}
		p.Refused(t0, t0, c.retryAfter)
		if got := p.State(t0).Gap; got != c.want {
			t.Errorf("%d accepted, retry-after %s: gap %s, want %s", c.accepted, c.retryAfter, got, c.want)
		}
	}
}
