package meshcrypto

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

const (
	attestPrefix       = "claudemesh-session-attest"
	sessionHelloPrefix = "claudemesh-session-hello"
)

// HelloSignature signs a member `hello` with the member identity, over
// `meshId|memberId|pubkey|timestamp` where pubkey is id's public key.
// The result is 128 lowercase hex characters.
func HelloSignature(id *Identity, meshID, memberID string, timestampMs int64) string {
	return signHex(id, helloMessage(meshID, memberID, id.PublicKeyHex(), timestampMs))
}

// VerifyHello verifies a member `hello` signature made by pubHex. The
// pubkey is signed exactly as given, so pass it as it appears on the wire.
func VerifyHello(pubHex, meshID, memberID string, timestampMs int64, sigHex string) error {
	return verifyHex(pubHex, helloMessage(meshID, memberID, pubHex, timestampMs), sigHex)
}

// SessionAttestation signs, with the parent member identity, the
// attestation that sessionPubHex belongs to it until expiresAtMs:
// `claudemesh-session-attest|parentMemberPubkey|sessionPubkey|expiresAt`.
func SessionAttestation(member *Identity, sessionPubHex string, expiresAtMs int64) string {
	return signHex(member, attestMessage(member.PublicKeyHex(), sessionPubHex, expiresAtMs))
}

// VerifySessionAttestation verifies an attestation signed by parentPubHex.
func VerifySessionAttestation(parentPubHex, sessionPubHex string, expiresAtMs int64, sigHex string) error {
	return verifyHex(parentPubHex, attestMessage(parentPubHex, sessionPubHex, expiresAtMs), sigHex)
}

// SessionHelloSignature signs a `session_hello` with the session identity:
// `claudemesh-session-hello|meshId|parentMemberPubkey|sessionPubkey|timestamp`.
func SessionHelloSignature(session *Identity, meshID, parentPubHex string, timestampMs int64) string {
	return signHex(session, sessionHelloMessage(meshID, parentPubHex, session.PublicKeyHex(), timestampMs))
}

// VerifySessionHello verifies a `session_hello` signature made by
// sessionPubHex.
func VerifySessionHello(sessionPubHex, meshID, parentPubHex string, timestampMs int64, sigHex string) error {
	return verifyHex(sessionPubHex, sessionHelloMessage(meshID, parentPubHex, sessionPubHex, timestampMs), sigHex)
}

func helloMessage(meshID, memberID, pubHex string, timestampMs int64) []byte {
	return joinFields(meshID, memberID, pubHex, strconv.FormatInt(timestampMs, 10))
}

func attestMessage(parentPubHex, sessionPubHex string, expiresAtMs int64) []byte {
	return joinFields(attestPrefix, parentPubHex, sessionPubHex, strconv.FormatInt(expiresAtMs, 10))
}

func sessionHelloMessage(meshID, parentPubHex, sessionPubHex string, timestampMs int64) []byte {
	return joinFields(sessionHelloPrefix, meshID, parentPubHex, sessionPubHex, strconv.FormatInt(timestampMs, 10))
}

func joinFields(fields ...string) []byte {
	return []byte(strings.Join(fields, "|"))
}

func signHex(id *Identity, msg []byte) string {
	return hex.EncodeToString(id.Sign(msg))
}

// verifyHex checks a hex signature (either case) over msg. Errors wrap
// ErrBadPublicKey, ErrMalformedSignature or ErrBadSignature.
func verifyHex(pubHex string, msg []byte, sigHex string) error {
	pub, err := ParsePublicKey(pubHex)
	if err != nil {
		return err
	}
	sig, err := decodeHex(sigHex, ed25519.SignatureSize)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformedSignature, err)
	}
	if !ed25519.Verify(pub, msg, sig) {
		return ErrBadSignature
	}
	return nil
}
