package meshcrypto

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
)

const (
	meshID   = "mesh-0"
	memberID = "member-0"
	ts       = int64(1763800000000)
)

func TestSignedBytes(t *testing.T) {
	tests := map[string]struct{ got, want string }{
		"hello": {
			string(helloMessage(meshID, memberID, pub0, ts)),
			"mesh-0|member-0|" + pub0 + "|1763800000000",
		},
		"attestation": {
			string(attestMessage(pub0, pub1, ts)),
			"claudemesh-session-attest|" + pub0 + "|" + pub1 + "|1763800000000",
		},
		"session hello": {
			string(sessionHelloMessage(meshID, pub0, pub1, ts)),
			"claudemesh-session-hello|mesh-0|" + pub0 + "|" + pub1 + "|1763800000000",
		},
	}
	for name, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s signs %q, want %q", name, tc.got, tc.want)
		}
	}
}

// TestSignaturesOverSpecStrings checks each signature against the literal
// wire string with crypto/ed25519, independently of the message builders.
func TestSignaturesOverSpecStrings(t *testing.T) {
	member, session := mustIdentity(t, secret0), mustIdentity(t, secret1)
	tests := map[string]struct {
		signer *Identity
		sig    string
		signed string
	}{
		"hello": {member, HelloSignature(member, meshID, memberID, ts),
			"mesh-0|member-0|" + pub0 + "|1763800000000"},
		"attestation": {member, SessionAttestation(member, pub1, ts),
			"claudemesh-session-attest|" + pub0 + "|" + pub1 + "|1763800000000"},
		"session hello": {session, SessionHelloSignature(session, meshID, pub0, ts),
			"claudemesh-session-hello|mesh-0|" + pub0 + "|" + pub1 + "|1763800000000"},
	}
	for name, tc := range tests {
		if tc.sig != strings.ToLower(tc.sig) || len(tc.sig) != 128 {
			t.Errorf("%s: signature %q is not 128 lowercase hex", name, tc.sig)
		}
		pub, _ := ParsePublicKey(tc.signer.PublicKeyHex())
		if !ed25519.Verify(pub, []byte(tc.signed), mustHex(t, tc.sig)) {
			t.Errorf("%s: signature does not cover %q", name, tc.signed)
		}
	}
}

func TestVerifySignatures(t *testing.T) {
	member, session := mustIdentity(t, secret0), mustIdentity(t, secret1)
	hello := HelloSignature(member, meshID, memberID, ts)
	attest := SessionAttestation(member, pub1, ts)
	shello := SessionHelloSignature(session, meshID, pub0, ts)
	badSig := hello[:127] + "0"
	if badSig == hello {
		badSig = hello[:127] + "1"
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"hello ok", VerifyHello(pub0, meshID, memberID, ts, hello), nil},
		{"hello upper-case sig", VerifyHello(pub0, meshID, memberID, ts, strings.ToUpper(hello)), nil},
		{"hello wrong mesh", VerifyHello(pub0, "mesh-1", memberID, ts, hello), ErrBadSignature},
		{"hello wrong member", VerifyHello(pub0, meshID, "member-1", ts, hello), ErrBadSignature},
		{"hello wrong timestamp", VerifyHello(pub0, meshID, memberID, ts+1, hello), ErrBadSignature},
		{"hello wrong key", VerifyHello(pub1, meshID, memberID, ts, hello), ErrBadSignature},
		{"hello flipped sig", VerifyHello(pub0, meshID, memberID, ts, badSig), ErrBadSignature},
		{"hello short sig", VerifyHello(pub0, meshID, memberID, ts, hello[:126]), ErrMalformedSignature},
		{"hello non-hex sig", VerifyHello(pub0, meshID, memberID, ts, "zz"+hello[2:]), ErrMalformedSignature},
		{"hello bad pubkey", VerifyHello(pub0[:63], meshID, memberID, ts, hello), ErrBadPublicKey},
		{"hello small-order pubkey", VerifyHello(order8Point, meshID, memberID, ts, hello), ErrBadPublicKey},
		{"attest ok", VerifySessionAttestation(pub0, pub1, ts, attest), nil},
		{"attest upper-case sig", VerifySessionAttestation(pub0, pub1, ts, strings.ToUpper(attest)), nil},
		{"attest wrong expiry", VerifySessionAttestation(pub0, pub1, ts+1, attest), ErrBadSignature},
		{"attest wrong session", VerifySessionAttestation(pub0, pub0, ts, attest), ErrBadSignature},
		{"attest signed by session", VerifySessionAttestation(pub1, pub1, ts, attest), ErrBadSignature},
		{"attest malformed", VerifySessionAttestation(pub0, pub1, ts, ""), ErrMalformedSignature},
		{"session hello ok", VerifySessionHello(pub1, meshID, pub0, ts, shello), nil},
		{"session hello upper-case sig", VerifySessionHello(pub1, meshID, pub0, ts, strings.ToUpper(shello)), nil},
		{"session hello wrong mesh", VerifySessionHello(pub1, "mesh-1", pub0, ts, shello), ErrBadSignature},
		{"session hello wrong parent", VerifySessionHello(pub1, meshID, pub1, ts, shello), ErrBadSignature},
		{"session hello signed by member", VerifySessionHello(pub0, meshID, pub0, ts, shello), ErrBadSignature},
		{"session hello not a hello", VerifySessionHello(pub0, meshID, memberID, ts, hello), ErrBadSignature},
		{"session hello bad pubkey", VerifySessionHello("", meshID, pub0, ts, shello), ErrBadPublicKey},
	}
	for _, tc := range tests {
		if tc.want == nil && tc.err != nil || !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, tc.err, tc.want)
		}
	}
}
