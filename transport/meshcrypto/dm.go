package meshcrypto

import (
	"crypto/rand"
	"fmt"

	"golang.org/x/crypto/nacl/box"
)

// NonceSize is the length of a crypto_box nonce.
const NonceSize = 24

// SealDM encrypts a direct message to recipientPubHex with libsodium's
// crypto_box_easy under a fresh random nonce. The box keys are the x25519
// conversions of the recipient's ed25519 public key and id's ed25519 secret
// key. It returns the nonce and tag ‖ ciphertext, both standard base64.
func (id *Identity) SealDM(recipientPubHex string, plaintext []byte) (nonceB64, ciphertextB64 string, err error) {
	nonce, err := randomNonce()
	if err != nil {
		return "", "", err
	}
	return id.SealDMWithNonce(recipientPubHex, plaintext, nonce)
}

// SealDMWithNonce is SealDM with a caller-chosen nonce. A nonce must never
// be reused with the same key pair; outside tests, use SealDM.
func (id *Identity) SealDMWithNonce(recipientPubHex string, plaintext []byte, nonce *[NonceSize]byte) (nonceB64, ciphertextB64 string, err error) {
	k, err := id.sharedKey(recipientPubHex)
	if err != nil {
		return "", "", fmt.Errorf("seal DM: %w", err)
	}
	ct := box.SealAfterPrecomputation(nil, plaintext, nonce, k)
	return b64.EncodeToString(nonce[:]), b64.EncodeToString(ct), nil
}

// OpenDM decrypts a direct message sent to id by senderPubHex. Errors wrap
// ErrBadPublicKey, ErrBadNonce, ErrBadCiphertext or, when authentication
// fails, ErrDecrypt.
func (id *Identity) OpenDM(senderPubHex, nonceB64, ciphertextB64 string) ([]byte, error) {
	nonce, err := decodeNonce(nonceB64)
	if err != nil {
		return nil, err
	}
	ct, err := b64.DecodeString(ciphertextB64)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCiphertext, err)
	}
	if len(ct) < box.Overhead {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte tag", ErrBadCiphertext, len(ct), box.Overhead)
	}
	k, err := id.sharedKey(senderPubHex)
	if err != nil {
		return nil, fmt.Errorf("open DM: %w", err)
	}
	msg, ok := box.OpenAfterPrecomputation(nil, ct, nonce, k)
	if !ok {
		return nil, ErrDecrypt
	}
	return msg, nil
}

// EncodePlain encodes a broadcast, group or topic body (`*`, `@group`,
// `#topic`). These bodies are NOT encrypted: the ciphertext is the standard
// base64 of the plaintext and the nonce is 24 meaningless random bytes.
func EncodePlain(plaintext []byte) (nonceB64, ciphertextB64 string, err error) {
	nonce, err := randomNonce()
	if err != nil {
		return "", "", err
	}
	return b64.EncodeToString(nonce[:]), b64.EncodeToString(plaintext), nil
}

// DecodePlain decodes a body produced by EncodePlain. Errors wrap
// ErrBadCiphertext.
func DecodePlain(ciphertextB64 string) ([]byte, error) {
	b, err := b64.DecodeString(ciphertextB64)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCiphertext, err)
	}
	return b, nil
}

func randomNonce() (*[NonceSize]byte, error) {
	var n [NonceSize]byte
	if _, err := rand.Read(n[:]); err != nil {
		return nil, fmt.Errorf("meshcrypto: nonce: %w", err)
	}
	return &n, nil
}

func decodeNonce(nonceB64 string) (*[NonceSize]byte, error) {
	b, err := b64.DecodeString(nonceB64)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadNonce, err)
	}
	if len(b) != NonceSize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrBadNonce, len(b), NonceSize)
	}
	return (*[NonceSize]byte)(b), nil
}
