package broker

import (
	"fmt"

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
type LegacyProtocol struct {
	PerMinute int // the rate the refusal text names, messages a minute
	Burst     int
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
