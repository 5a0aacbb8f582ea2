package messages

import "time"

// Held messages on the daemon: GET /v1/inbox for an agent session first
// asks the session's broker connection (actors.BrokerConn) to pull what
// the broker holds for it while its status is working or dnd
// (drain_held, held_frames.go), and lists the inbox once what was pulled
// is stored. A link that is down, or a broker that did not advertise the
// ability "held" (upstream's, an older one), is not asked: the listing
// is what is stored.

// HeldPullTimeout bounds a pull: the broker's answer and the inbox's
// commit of what it pushed.
const HeldPullTimeout = time.Second

// PullHeld asks a mesh's broker connection to have the broker push now
// what it holds for the connection, and to answer once those messages are
// in the inbox; the reply is *HeldPulled.
type PullHeld struct{}

// HeldPulled is the reply to *PullHeld: Pushed messages were pulled and
// are stored (More: the broker holds more than one drain pushes). Err
// says why nothing was pulled: the link is down, the broker cannot, or it
// did not answer within HeldPullTimeout.
type HeldPulled struct {
	Pushed int
	More   bool
	Err    error
}

// Failure returns the pull's error, nil on success.
func (r *HeldPulled) Failure() error { return r.Err }
