package broker

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Held messages (messages/held_frames.go): a connection whose status is
// working or dnd takes priority "now" only; the rest of what is queued
// for its keys waits until it is idle (drain), which keeps upstream's
// semantics for every client. drain_held is the pull of a client that
// wants those messages now: one claim of every row queued for the
// connection's keys, whatever its priority, pushed as a drain pushes, and
// then the answer with the count, after the pushes on the same link.

// FeatureHeld is the ability advertised to clients (version 1): the
// broker takes drain_held.
const FeatureHeld = "held"

// heldFrames are the held-message requests.
var heldFrames = frames{
	acts((*conn).drainHeld),
}

// drainHeld pushes what the connection's keys hold, up to a drain's batch
// (More: another drain_held pushes the rest), and answers held_drained.
func (c *conn) drainHeld(ctx actor.Context, f *messages.DrainHeldFrame) {
	if c.legacy != nil {
		return // upstream has no drain_held, and ignores the frame types it does not know
	}
	claimed, pushed, err := c.claimAndPush(ctx, false)
	if err != nil {
		c.sendFrame(&messages.ErrorFrame{Type: messages.TypeError, Code: CodeUnavailable,
			Message: "the broker could not read the held messages; retry", ID: f.ReqID, ReqID: f.ReqID})
		return
	}
	c.sendFrame(&messages.HeldDrainedFrame{Type: messages.TypeHeldDrained, Pushed: pushed, More: claimed == drainBatch, ReqID: f.ReqID})
}
