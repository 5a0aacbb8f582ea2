package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// Hello error codes of this broker beyond the upstream ones (wire protocol
// §1.6); each closes the connection with 1008 and the code as reason.
const (
	// CodeHelloReplayed: the signed hello (or session_hello) was already
	// used within its clock-skew window, at this broker or another replica
	// of its database.
	CodeHelloReplayed = "hello_replayed"
	// CodeDisplayNameTaken: a session_hello's displayName reads the same as
	// the name of another member of the mesh, or of another member's
	// session (messages.NameKey).
	CodeDisplayNameTaken = messages.CodeDisplayNameTaken
	// CodeUnavailable: the broker could not check the hello (its database
	// failed); the client retries.
	CodeUnavailable = "unavailable"
)

// HelloMemory is how long a hello's signature is remembered after its
// timestamp: the skew window it is accepted in (MaxClockSkew after it),
// and as much again for replicas whose clocks run behind this one's.
const HelloMemory = 2 * MaxClockSkew

// firstUse records the signature of a hello that passed every other check
// and reports whether this is its first use; a replay is refused with
// hello_replayed (close 1008). Checked last, so that only a hello the
// broker would otherwise accept is recorded.
func (c *conn) firstUse(pubkey, signature string, timestampMs int64) bool {
	err := c.store.RecordHello(context.Background(), pubkey, signature, time.UnixMilli(timestampMs).Add(HelloMemory))
	switch {
	case err == nil:
		return true
	case errors.Is(err, broker.ErrHelloReplayed):
		c.metrics.helloReplays.Inc()
		c.log.Warn("hello_replayed", "conn", c.id, "pubkey_prefix", pubkey[:16], "remote", c.link.Remote)
		c.reject(CodeHelloReplayed, "this signed hello was already used (a replay, or two hellos signed with one timestamp); sign a new one")
	default:
		c.log.Error("record hello", "conn", c.id, "err", err)
		c.reject(CodeUnavailable, "the broker could not check the hello; retry")
	}
	return false
}

// sessionNameFree refuses (display_name_taken) a session_hello whose own
// display name reads the same as the name of a member other than its own:
// a session of bob's must not pass for alice. Its own member's name is
// allowed (a session without a name shows it anyway).
func (c *conn) sessionNameFree(meshID string, member *broker.Member, name string) bool {
	if name == "" {
		return true
	}
	holder, err := c.store.ClaimSessionName(context.Background(), meshID, name, member)
	switch {
	case err != nil:
		c.log.Error("check a session's display name", "conn", c.id, "err", err)
		c.reject(CodeUnavailable, "the broker could not check the session's display name; retry")
		return false
	case holder != "":
		c.reject(CodeDisplayNameTaken, (&broker.NameTakenError{Name: name, Holder: holder}).Error()+
			fmt.Sprintf(" (a session of %q may use its member's name, or a name of its own that no other member's reads as)", member.DisplayName))
		return false
	}
	return true
}
