package meshcrypto

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/crypto/nacl/box"
)

// Identity is an ed25519 key pair: a member key or a session key. It keeps
// the crypto_box shared keys of the peers it talks to (see sharedKey), so
// sealing the thousandth DM to a peer costs a stream cipher, not a scalar
// multiplication. Use it through a pointer; it is safe for concurrent use.
type Identity struct {
	priv ed25519.PrivateKey // libsodium layout: seed(32) ‖ pubkey(32)

	mu     sync.Mutex
	shared map[string]*[32]byte // lowercase peer pubkey hex → crypto_box shared key
}

// maxSharedKeys bounds the shared-key cache; when full it starts over.
const maxSharedKeys = 4096

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

// sharedKey is crypto_box's precomputed key between id and the peer:
// X25519(X(id's secret), X(peer's public key)), the same in both directions.
// It is computed once per peer and cached.
func (id *Identity) sharedKey(peerPubHex string) (*[32]byte, error) {
	peer := strings.ToLower(peerPubHex)
	id.mu.Lock()
	k, ok := id.shared[peer]
	id.mu.Unlock()
	if ok {
		return k, nil
	}
	p, err := parsePoint(peer)
	if err != nil {
		return nil, err
	}
	sk := id.x25519Secret()
	defer clear(sk[:])
	k = new([32]byte)
	box.Precompute(k, x25519Public(p), sk)
	id.mu.Lock()
	if id.shared == nil || len(id.shared) >= maxSharedKeys {
		id.shared = make(map[string]*[32]byte)
	}
	id.shared[peer] = k
	id.mu.Unlock()
	return k, nil
}
