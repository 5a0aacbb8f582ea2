package meshcrypto

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func TestDMRoundTrip(t *testing.T) {
	alice, bob := mustGenerate(t), mustGenerate(t)
	for _, msg := range []string{"", "hi", "héllo ✓", strings.Repeat("x", 70000)} {
		nonce, ct, err := alice.SealDM(bob.PublicKeyHex(), []byte(msg))
		if err != nil {
			t.Fatal(err)
		}
		if len(nonce) != 32 {
			t.Errorf("nonce %q: want 32 base64 chars", nonce)
		}
		if n := decodedLen(t, ct); n != len(msg)+16 {
			t.Errorf("ciphertext is %d bytes, want %d", n, len(msg)+16)
		}
		got, err := bob.OpenDM(alice.PublicKeyHex(), nonce, ct)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != msg {
			t.Errorf("round trip = %q, want %q", got, msg)
		}
	}
}

func TestSealDMFreshNonce(t *testing.T) {
	alice := mustIdentity(t, secret0)
	n1, c1, err := alice.SealDM(pub1, []byte("same"))
	if err != nil {
		t.Fatal(err)
	}
	n2, c2, err := alice.SealDM(pub1, []byte("same"))
	if err != nil {
		t.Fatal(err)
	}
	if n1 == n2 || c1 == c2 {
		t.Error("two seals reused a nonce")
	}
}

func TestSealDMBadRecipient(t *testing.T) {
	alice := mustIdentity(t, secret0)
	for _, pub := range []string{"", pub0[:60], order8Point, mixedOrderPoint(t)} {
		if _, _, err := alice.SealDM(pub, []byte("x")); !errors.Is(err, ErrBadPublicKey) {
			t.Errorf("SealDM(%q) err = %v, want ErrBadPublicKey", pub, err)
		}
	}
}

func TestOpenDMTampered(t *testing.T) {
	alice, bob := mustIdentity(t, secret0), mustIdentity(t, secret1)
	nonce, ct, err := alice.SealDM(pub1, []byte("attack at dawn"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(ct)
	for i := range raw {
		flipped := bytes.Clone(raw)
		flipped[i] ^= 0x01
		_, err := bob.OpenDM(pub0, nonce, base64.StdEncoding.EncodeToString(flipped))
		if !errors.Is(err, ErrDecrypt) {
			t.Fatalf("flipped byte %d: err = %v, want ErrDecrypt", i, err)
		}
	}
	otherNonce, _, err := EncodePlain(nil)
	if err != nil {
		t.Fatal(err)
	}
	stranger := mustGenerate(t)
	tests := map[string]struct {
		opener        *Identity
		sender, nonce string
	}{
		"wrong nonce":     {bob, pub0, otherNonce},
		"wrong sender":    {bob, stranger.PublicKeyHex(), nonce},
		"wrong recipient": {stranger, pub0, nonce},
	}
	for name, tc := range tests {
		if _, err := tc.opener.OpenDM(tc.sender, tc.nonce, ct); !errors.Is(err, ErrDecrypt) {
			t.Errorf("%s: err = %v, want ErrDecrypt", name, err)
		}
	}
}

func TestOpenDMBadInput(t *testing.T) {
	bob := mustIdentity(t, secret1)
	const nonce = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	const ct = "2pvT8Zqy1FJ5DmACMRhMC7KYHftq" // vector 0: "hello" from pub0
	b64 := base64.StdEncoding.EncodeToString
	tests := []struct {
		name, sender, nonce, ct string
		want                    error
	}{
		{"valid", pub0, nonce, ct, nil},
		{"sender empty", "", nonce, ct, ErrBadPublicKey},
		{"sender short", pub0[:62], nonce, ct, ErrBadPublicKey},
		{"sender not hex", "x" + pub0[1:], nonce, ct, ErrBadPublicKey},
		{"sender small order", order8Point, nonce, ct, ErrBadPublicKey},
		{"sender identity point", "01" + strings.Repeat("0", 62), nonce, ct, ErrBadPublicKey},
		{"sender mixed order", mixedOrderPoint(t), nonce, ct, ErrBadPublicKey},
		{"nonce empty", pub0, "", ct, ErrBadNonce},
		{"nonce bad base64", pub0, "!!!!" + nonce[4:], ct, ErrBadNonce},
		{"nonce url alphabet", pub0, "-_" + nonce[2:], ct, ErrBadNonce},
		{"nonce 23 bytes", pub0, b64(make([]byte, 23)), ct, ErrBadNonce},
		{"nonce 25 bytes", pub0, b64(make([]byte, 25)), ct, ErrBadNonce},
		{"nonce unpadded", pub0, base64.RawStdEncoding.EncodeToString(make([]byte, 23)), ct, ErrBadNonce},
		{"ciphertext bad base64", pub0, nonce, "%%%%", ErrBadCiphertext},
		{"ciphertext missing padding", pub0, nonce, "vG6JqAMJrQYG9l7yCuVaWg", ErrBadCiphertext},
		{"ciphertext empty", pub0, nonce, "", ErrBadCiphertext},
		{"ciphertext 15 bytes", pub0, nonce, b64(make([]byte, 15)), ErrBadCiphertext},
		{"ciphertext 16 zero bytes", pub0, nonce, b64(make([]byte, 16)), ErrDecrypt},
		{"plain body", pub0, nonce, b64([]byte("hello, not a box")), ErrDecrypt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bob.OpenDM(tc.sender, tc.nonce, tc.ct)
			if tc.want == nil && err != nil || !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestPlainRoundTrip(t *testing.T) {
	for _, msg := range []string{"", "hello @group", "héllo ✓"} {
		nonce, ct, err := EncodePlain([]byte(msg))
		if err != nil {
			t.Fatal(err)
		}
		if decodedLen(t, nonce) != NonceSize {
			t.Errorf("nonce %q is not %d bytes", nonce, NonceSize)
		}
		if want := base64.StdEncoding.EncodeToString([]byte(msg)); ct != want {
			t.Errorf("ciphertext = %q, want %q", ct, want)
		}
		got, err := DecodePlain(ct)
		if err != nil || string(got) != msg {
			t.Errorf("DecodePlain = %q, %v; want %q", got, err, msg)
		}
	}
}

func TestDecodePlainBad(t *testing.T) {
	for _, in := range []string{"!", "aGVsbG8", "aGVsbG9=", "aGVs bG8="} {
		if _, err := DecodePlain(in); !errors.Is(err, ErrBadCiphertext) {
			t.Errorf("DecodePlain(%q) err = %v, want ErrBadCiphertext", in, err)
		}
	}
}

func mustGenerate(tb testing.TB) *Identity {
	tb.Helper()
	id, err := GenerateIdentity()
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

func decodedLen(tb testing.TB, s string) int {
	tb.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		tb.Fatalf("not std base64: %q", s)
	}
	return len(b)
}
