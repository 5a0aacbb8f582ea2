package wsclient

import (
	"cmp"
	"os"
	"strings"
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
	ts := cfg.Now().UnixMilli()
	signer := cfg.Identity
	if cfg.signWith != nil {
		signer = cfg.signWith
	}
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
		PID: pid, Cwd: cfg.Cwd, Hostname: cfg.Hostname, PeerType: "ai", Channel: "claudemesh-daemon",
		Timestamp: ts, Signature: meshcrypto.HelloSignature(signer, cfg.MeshID, cfg.MemberID, ts)}
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
