package meshcrypto

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"
)

// FuzzOpenDM checks that OpenDM never panics, fails only with the
// documented sentinel errors, and that anything it opens re-seals (crypto_box
// keys are symmetric) to the exact same ciphertext bytes.
func FuzzOpenDM(f *testing.F) {
	// Seeds live in testdata/fuzz/FuzzOpenDM; valid-vector opens under
	// the recipient of libsodium vector 0.
	recipient := mustIdentity(f, loadVectors(f)[0].RecipientSecretHex)
	f.Fuzz(func(t *testing.T, senderPubHex, nonceB64, ciphertextB64 string) {
		msg, err := recipient.OpenDM(senderPubHex, nonceB64, ciphertextB64)
		if err != nil {
			if !isSentinel(err) {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		nonce, err := decodeNonce(nonceB64)
		if err != nil {
			t.Fatal(err)
		}
		_, resealed, err := recipient.SealDMWithNonce(senderPubHex, msg, nonce)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := base64.StdEncoding.DecodeString(ciphertextB64)
		got, _ := base64.StdEncoding.DecodeString(resealed)
		if !bytes.Equal(got, want) {
			t.Fatalf("re-seal mismatch")
		}
	})
}

func isSentinel(err error) bool {
	for _, s := range []error{ErrBadPublicKey, ErrBadNonce, ErrBadCiphertext, ErrDecrypt} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
