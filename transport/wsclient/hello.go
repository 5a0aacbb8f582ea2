package wsclient

import (
	"cmp"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// SessionAttestationTTL is how long the attestation of a session_hello
// lasts; a new one is signed at every dial.
const SessionAttestationTTL = 12 * time.Hour

// hello is the first frame: a member hello, or a session_hello when
// cfg.Parent is set.
func (h *handshake) hello() any {
	cfg := h.cfg
	signer := cfg.Identity
	if cfg.signWith != nil {
		signer = cfg.signWith
	}
	ts := helloTimestamps.next(signer.PublicKeyHex(), cfg.Now().UnixMilli())
	pid := cmp.Or(cfg.PID, os.Getpid())
	if cfg.Parent != nil {
		session, parent := cfg.Identity.PublicKeyHex(), cfg.Parent.PublicKeyHex()
		expires := ts + SessionAttestationTTL.Milliseconds()
		return &messages.SessionHelloFrame{Type: messages.TypeSessionHello, MeshID: cfg.MeshID, ParentMemberID: cfg.MemberID,
			ParentMemberPubkey: parent, SessionPubkey: session,
			ParentAttestation: messages.Attestation{SessionPubkey: session, ParentMemberPubkey: parent, ExpiresAt: expires,
				Signature: meshcrypto.SessionAttestation(cfg.Parent, session, expires)},
			DisplayName: cfg.DisplayName, SessionID: cfg.SessionID, PID: pid, Cwd: cfg.Cwd, Hostname: cfg.Hostname,
			PeerType: "ai", Channel: "claudemesh-session", Groups: groupsOf(cfg.Groups), Timestamp: ts,
			Signature: meshcrypto.SessionHelloSignature(signer, cfg.MeshID, parent, ts)}
	}
	return &messages.HelloFrame{Type: messages.TypeHello, MeshID: cfg.MeshID, MemberID: cfg.MemberID,
		Pubkey: cfg.Identity.PublicKeyHex(), DisplayName: cfg.DisplayName, SessionID: cfg.SessionID,
		PID: pid, Cwd: cfg.Cwd, Hostname: cfg.Hostname, PeerType: "ai", Channel: cfg.Channel, DaemonVersion: cfg.DaemonVersion,
		Timestamp: ts, Signature: meshcrypto.HelloSignature(signer, cfg.MeshID, cfg.MemberID, ts)}
}

// helloTimestamps hands out hello timestamps (Unix ms) per signing key,
// each later than the last this process used for that key. Two hellos of
// one key with one timestamp carry the same signature, and a broker that
// refuses replays (ours, hello_replayed) would take the second for a
// replay of the first: two connections opened in the same millisecond (a
// daemon and a cold-path send, a quick redial) must not collide. A bumped
// timestamp is ahead by a few milliseconds at most, well inside the ±60 s
// the broker allows.
var helloTimestamps = &lastTimestamps{last: map[string]int64{}}

type lastTimestamps struct {
	mu   sync.Mutex
	last map[string]int64
}

// next returns now, or the key's last timestamp plus one when now is not
// later than it by less than a second (a clock set far back, as in a test,
// is left alone). Keys whose last timestamp is a minute old are forgotten.
func (l *lastTimestamps) next(key string, now int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	ts := now
	if last, ok := l.last[key]; ok && now <= last && last-now < time.Second.Milliseconds() {
		ts = last + 1
	}
	l.last[key] = ts
	if len(l.last) > 64 {
		for k, t := range l.last {
			if t < now-time.Minute.Milliseconds() {
				delete(l.last, k)
			}
		}
	}
	return ts
}

// groupsOf parses "@name[:role]" (the leading @ optional) into hello groups.
func groupsOf(specs []string) []messages.Group {
	var out []messages.Group
	for _, g := range specs {
		name, role, _ := strings.Cut(strings.TrimPrefix(g, "@"), ":")
		out = append(out, messages.Group{Name: name, Role: role})
	}
	return out
}
