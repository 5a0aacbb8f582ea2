// Package meshcrypto owns the claudemesh wire cryptography: ed25519
// identities, crypto_box direct messages, the unencrypted base64 encoding of
// broadcast/group/topic bodies, and the hello, session-attestation and
// session-hello signatures.
//
// Everything here is byte-for-byte interoperable with libsodium as the
// upstream TypeScript CLI uses it (libsodium-wrappers): keys travel as hex,
// nonces and ciphertexts as standard padded base64, signatures as lowercase
// hex.
package meshcrypto

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
)

// Sentinel errors. Functions wrap them with %w; use errors.Is to branch.
var (
	// ErrBadSecretKey reports a secret key that is not 128 hex characters or
	// whose embedded public key does not match its seed.
	ErrBadSecretKey = errors.New("meshcrypto: bad secret key")
	// ErrBadPublicKey reports a public key that is not 64 hex characters or
	// that libsodium would reject (not a canonical curve point, small order,
	// or outside the prime-order subgroup).
	ErrBadPublicKey = errors.New("meshcrypto: bad public key")
	// ErrBadNonce reports a nonce that is not base64 of exactly 24 bytes.
	ErrBadNonce = errors.New("meshcrypto: bad nonce")
	// ErrBadCiphertext reports a ciphertext that is not valid base64 or is
	// too short to hold the authentication tag.
	ErrBadCiphertext = errors.New("meshcrypto: bad ciphertext")
	// ErrDecrypt reports a box that failed authentication: wrong keys,
	// wrong nonce or tampered ciphertext.
	ErrDecrypt = errors.New("meshcrypto: decryption failed")
	// ErrMalformedSignature reports a signature that is not 128 hex characters.
	ErrMalformedSignature = errors.New("meshcrypto: malformed signature")
	// ErrBadSignature reports a well-formed signature that does not verify.
	ErrBadSignature = errors.New("meshcrypto: bad signature")
)

// b64 is libsodium's ORIGINAL variant: standard alphabet with padding. Strict
// mode rejects non-zero trailing bits, as libsodium does.
var b64 = base64.StdEncoding.Strict()

// decodeHex decodes exactly n bytes from s, accepting either hex case.
func decodeHex(s string, n int) ([]byte, error) {
	if len(s) != 2*n {
		return nil, fmt.Errorf("want %d hex characters, got %d", 2*n, len(s))
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, errors.New("invalid hex")
	}
	return b, nil
}
