package meshcrypto

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
)

// Identity is an ed25519 key pair: a member key or a session key.
type Identity struct {
	priv ed25519.PrivateKey // libsodium layout: seed(32) ‖ pubkey(32)
}

// ParseIdentity decodes a libsodium secret key: 128 hex characters holding
// seed(32) ‖ pubkey(32). It fails with ErrBadSecretKey if the length or hex
// is wrong or the embedded public key does not match the seed.
func ParseIdentity(secretKeyHex string) (*Identity, error) {
	b, err := decodeHex(secretKeyHex, ed25519.PrivateKeySize)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSecretKey, err)
	}
	priv := ed25519.NewKeyFromSeed(b[:ed25519.SeedSize])
	clear(b[:ed25519.SeedSize])
	if !bytes.Equal(priv[ed25519.SeedSize:], b[ed25519.SeedSize:]) {
		return nil, fmt.Errorf("%w: embedded public key does not match seed", ErrBadSecretKey)
	}
	return &Identity{priv: priv}, nil
}

// GenerateIdentity creates a fresh random identity.
func GenerateIdentity() (*Identity, error) {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, fmt.Errorf("meshcrypto: generate key: %w", err)
	}
	return &Identity{priv: priv}, nil
}

// PublicKeyHex returns the public key as 64 lowercase hex characters.
func (id *Identity) PublicKeyHex() string {
	return hex.EncodeToString(id.priv[ed25519.SeedSize:])
}

// SecretKeyHex returns the secret key as 128 lowercase hex characters in
// libsodium's seed ‖ pubkey layout. Treat the result as a secret.
func (id *Identity) SecretKeyHex() string {
	return hex.EncodeToString(id.priv)
}

// Sign returns the 64-byte ed25519 detached signature of msg.
func (id *Identity) Sign(msg []byte) []byte {
	return ed25519.Sign(id.priv, msg)
}

// String identifies the key pair by its public key only, so that printing
// an Identity never leaks the secret.
func (id *Identity) String() string {
	return "meshcrypto.Identity(" + id.PublicKeyHex() + ")"
}

// GoString is like String, for %#v.
func (id *Identity) GoString() string {
	return id.String()
}

// x25519Secret is libsodium's crypto_sign_ed25519_sk_to_curve25519: the
// clamped first half of SHA-512(seed).
func (id *Identity) x25519Secret() *[32]byte {
	h := sha512.Sum512(id.priv[:ed25519.SeedSize])
	h[0] &= 248
	h[31] &= 127
	h[31] |= 64
	var k [32]byte
	copy(k[:], h[:32])
	clear(h[:])
	return &k
}
