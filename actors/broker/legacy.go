package broker

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
)

// LegacyProtocol, set in Options, makes the broker answer as the upstream
// broker does (wire protocol §1–§2), for interop tests of a daemon on a
// broker that speaks only the legacy protocol (`broker up
// --legacy-protocol`, a hidden flag). Never for production: it drops the
// acks' status codes and retry-after that clients rely on. What changes:
//   - feature_negotiation_request is ignored, as upstream ignores frame
//     types it does not know (a client waiting for the answer times out);
//   - acks have upstream's shape only: {type, id, messageId, queued}, and
//     a refusal's error is one of §2.3's strings where upstream has one —
//     `rate_limit: max <n> msg/min (burst <b>) — slow down` with no
//     retry-after, `payload too large: <N> bytes > MAX_MESSAGE_BYTES=<M>`,
//     `no connected peer for target (…)` for a DM to a key with no
//     connection the broker could push to now (upstream refuses what it
//     cannot deliver live; this broker would queue it) — else this
//     broker's error code;
//   - a member's hello displayName names its presence in peer lists and
//     pushes, as upstream's does (ours lists the name the member joined
//     with).
//
// The limiter is the caller's to choose: upstream's is a token bucket
// (ratelimit.Bucket), which PerMinute and Burst describe in the refusal.
// Dedupe stays: a repeated client_message_id is answered as the first was,
// where upstream would store it twice.
//
// HandlerDelay (`broker up --legacy-concurrent`, hidden) handles a
// connection's frames concurrently, as upstream does: its broker runs each
// frame's handler without waiting for the previous one (`ws.on("message",
// async …)`), so that two sends of one connection are stored, acked and
// pushed in the order their awaits return, not the order they came in.
// Each frame after the hello is handled after a random delay of up to
// HandlerDelay (its handler's awaits); two frames closer together than
// that may swap. Zero: one connection's frames in the order they came, as
// this broker keeps them.
type LegacyProtocol struct {
	PerMinute    int // the rate the refusal text names, messages a minute
	Burst        int
	HandlerDelay time.Duration
}

// frameDelayed is a frame of a legacy connection handed back after its
// delay (LegacyProtocol.HandlerDelay).
type frameDelayed struct{ data []byte }

// legacyConcurrent hands a frame back to the connection after a random
// delay of up to HandlerDelay, and reports whether it did: only after the
// hello, and only when the delay is set.
func (c *conn) legacyConcurrent(ctx actor.Context, data []byte) bool {
	if c.legacy == nil || c.legacy.HandlerDelay <= 0 || c.member == nil {
		return false
	}
	workers.SendLater(ctx, rand.N(c.legacy.HandlerDelay), &frameDelayed{data: data})
	return true
}

// Upstream's refusal texts (wire protocol §2.3).
const (
	legacyNoPeer    = "no connected peer for target (not online, or targetSpec is your own key without another session)"
	legacyRateLimit = "rate_limit: max %d msg/min (burst %d) — slow down"
	legacyTooLarge  = "payload too large: %d bytes > MAX_MESSAGE_BYTES=%d"
)

// legacyAck is ack in upstream's shape.
func (c *conn) legacyAck(ack *messages.AckFrame) *messages.AckFrame {
	out := &messages.AckFrame{Type: messages.TypeAck, ID: ack.ID, MessageID: ack.MessageID, Queued: ack.Queued, Error: ack.Error}
	switch {
	case ack.Queued:
		out.Error = ""
	case ack.Code == 429:
		out.Error = fmt.Sprintf(legacyRateLimit, c.legacy.PerMinute, c.legacy.Burst)
	}
	if !out.Queued {
		out.MessageID = ""
	}
	return out
}

// legacyTooLarge refuses, with upstream's text, a send larger than the
// mesh's limit (counted as upstream counts it); it reports whether it did.
func (c *conn) legacyTooLarge(f *messages.SendFrame) bool {
	n := len(f.Ciphertext) + len(f.Nonce) + len(f.TargetSpec)
	if n <= c.mesh.MaxPayloadBytes {
		return false
	}
	c.metrics.accepts.WithLabelValues("rejected").Inc()
	c.sendFrame(&messages.AckFrame{Type: messages.TypeAck, ID: f.ID, Error: fmt.Sprintf(legacyTooLarge, n, c.mesh.MaxPayloadBytes)})
	return true
}

// legacyNoPeer refuses, with upstream's text, a DM that has no recipient
// the broker could push to now; it reports whether it did.
func (c *conn) legacyNoPeer(ack *messages.AckFrame, r *hubResolved) bool {
	if r.kind != messages.KindDM || len(r.online) > 0 {
		return false
	}
	ack.Error = legacyNoPeer
	c.reply(ack)
	return true
}
