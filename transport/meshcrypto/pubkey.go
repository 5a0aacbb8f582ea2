package meshcrypto

import (
	"bytes"
	"crypto/ed25519"
	"fmt"

	"filippo.io/edwards25519"
)

// ParsePublicKey decodes a 64-hex-character ed25519 public key (either hex
// case). Like libsodium, it rejects encodings that are not canonical curve
// points, small-order points and points outside the prime-order subgroup;
// all such failures wrap ErrBadPublicKey.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	p, err := parsePoint(s)
	if err != nil {
		return nil, err
	}
	return ed25519.PublicKey(p.Bytes()), nil
}

// parsePoint decodes and validates a hex ed25519 public key.
func parsePoint(s string) (*edwards25519.Point, error) {
	b, err := decodeHex(s, ed25519.PublicKeySize)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadPublicKey, err)
	}
	p, err := new(edwards25519.Point).SetBytes(b)
	if err != nil || !bytes.Equal(p.Bytes(), b) {
		return nil, fmt.Errorf("%w: not a canonical curve point", ErrBadPublicKey)
	}
	if hasSmallOrder(p) || !inPrimeOrderSubgroup(p) {
		return nil, fmt.Errorf("%w: small-order or mixed-order point", ErrBadPublicKey)
	}
	return p, nil
}

// hasSmallOrder reports whether p is in the 8-torsion subgroup.
func hasSmallOrder(p *edwards25519.Point) bool {
	q := new(edwards25519.Point).MultByCofactor(p)
	return q.Equal(edwards25519.NewIdentityPoint()) == 1
}

// inPrimeOrderSubgroup reports whether [L]p is the identity, computed as
// [L-1]p + p since L itself is not a representable scalar.
func inPrimeOrderSubgroup(p *edwards25519.Point) bool {
	q := new(edwards25519.Point).ScalarMult(scalarMinusOne, p)
	return q.Add(q, p).Equal(edwards25519.NewIdentityPoint()) == 1
}

// scalarMinusOne is L-1, the largest canonical scalar.
var scalarMinusOne = func() *edwards25519.Scalar {
	one, err := edwards25519.NewScalar().SetCanonicalBytes(append([]byte{1}, make([]byte, 31)...))
	if err != nil {
		panic("meshcrypto: scalar one: " + err.Error())
	}
	return edwards25519.NewScalar().Negate(one)
}()

// x25519Public is libsodium's crypto_sign_ed25519_pk_to_curve25519 for a
// public key that parsePoint accepted.
func x25519Public(p *edwards25519.Point) *[32]byte {
	var k [32]byte
	copy(k[:], p.BytesMontgomery())
	return &k
}
