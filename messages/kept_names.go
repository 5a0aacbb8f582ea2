package messages

import (
	"fmt"
	"net/http"
	"time"
)

// The names a mesh's broker link gave last — the peer list's display
// names and keys, the topics' names and ids — kept in outbox.db per route
// (a membership's slug, or a session's route: a session's own view), so
// that a send to a display name or a `#name` resolves while the broker is
// away, across reconnects and daemon restarts, and queues as a send to a
// key or an id does. A name never seen is still refused (NeverSeen).

// NameTimeout is how long resolving a display name or a `#name` waits for
// the broker's list before it answers from the kept names.
const NameTimeout = 5 * time.Second

// The kinds of kept names.
const (
	KeptPeerNames  = "peers"  // a peer list's display names → keys
	KeptTopicNames = "topics" // the topics' names → ids
)

// ReadKeptNames asks the store for the names Route kept; the reply is
// *KeptNames. A broker connection sends it as it starts.
type ReadKeptNames struct{ Route string }

// KeptNames is the reply to *ReadKeptNames.
type KeptNames struct {
	// Peers is the last peer list kept, each peer with its DisplayName,
	// Pubkey, MemberPubkey and PeerRole only; nil: none was.
	Peers []Peer
	// Topics is the topic ids by name; nil: no topic list was kept.
	Topics map[string]string
	Err    error
}

// Failure returns the store's error, nil on success.
func (k *KeptNames) Failure() error { return k.Err }

// KeepNames has the store keep Route's names of one Kind (KeptPeerNames:
// Peers; KeptTopicNames: Topics), replacing those it kept of that kind.
// The broker connection sends it when a list changes what it keeps; no
// reply.
type KeepNames struct {
	Route  string
	Kind   string
	Peers  []Peer
	Topics map[string]string
	Now    int64
}

// ForgetNames has the store forget every name Route kept: the session
// whose route it is has ended. No reply.
type ForgetNames struct{ Route string }

// KeptPeers asks a mesh's broker connection for the last peer list it had,
// which it keeps across reconnects and restarts (its names only, as
// KeptNames has them); it asks the broker nothing. The reply is
// *PeersList, whose Err says the connection never had one.
type KeptPeers struct{}

// NeverSeen is the refusal of a send to name (a display name, or a
// `#name`: what, "peer" or "topic") while the broker of mesh is away or
// does not answer (cause), and no list the daemon kept gives it: 503
// broker_unavailable, nothing stored; instead names what may be sent to.
func NeverSeen(what, name, mesh string, cause error, instead string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeBrokerUnavailable,
		Detail: fmt.Sprintf("cannot resolve %q: the broker of mesh %s is away (%v) and the name was never seen in its %s lists; "+
			"nothing was stored: retry once it is connected, or send to %s", name, mesh, cause, what, instead)}
}
