package meshcrypto

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"filippo.io/edwards25519"
)

const (
	// Key pair 0 of the libsodium vectors (seed 01…01).
	secret0 = "01010101010101010101010101010101010101010101010101010101010101018a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c"
	pub0    = "8a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c"
	// Key pair 1 of the libsodium vectors (seed 02…02).
	secret1 = "02020202020202020202020202020202020202020202020202020202020202028139770ea87d175f56a35466c34c7ecccb8d8a91b4ee37a25df60f5b8fc9b394"
	pub1    = "8139770ea87d175f56a35466c34c7ecccb8d8a91b4ee37a25df60f5b8fc9b394"

	// A point of order 8.
	order8Point = "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"
)

// mixedOrderPoint returns pub0 plus a point of order 8: a valid curve point
// outside the prime-order subgroup.
func mixedOrderPoint(tb testing.TB) string {
	tb.Helper()
	a, err := new(edwards25519.Point).SetBytes(mustHex(tb, pub0))
	if err != nil {
		tb.Fatal(err)
	}
	t8, err := new(edwards25519.Point).SetBytes(mustHex(tb, order8Point))
	if err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(a.Add(a, t8).Bytes())
}

func mustHex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestParseIdentity(t *testing.T) {
	id := mustIdentity(t, strings.ToUpper(secret0))
	if id.PublicKeyHex() != pub0 || id.SecretKeyHex() != secret0 {
		t.Errorf("got pub %s secret %s", id.PublicKeyHex(), id.SecretKeyHex())
	}
}

func TestParseIdentityErrors(t *testing.T) {
	tests := map[string]string{
		"empty":         "",
		"too short":     secret0[:126],
		"too long":      secret0 + "00",
		"public only":   pub0,
		"not hex":       "zz" + secret0[2:],
		"mismatch pub":  secret0[:64] + pub1,
		"flipped pub":   secret0[:127] + "d",
		"swapped halfs": secret0[64:] + secret0[:64],
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseIdentity(in)
			if !errors.Is(err, ErrBadSecretKey) {
				t.Fatalf("err = %v, want ErrBadSecretKey", err)
			}
			if len(in) >= 64 && strings.Contains(err.Error(), in[:64]) {
				t.Errorf("error leaks the key: %v", err)
			}
		})
	}
}

func TestGenerateIdentity(t *testing.T) {
	id, err := GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	back := mustIdentity(t, id.SecretKeyHex())
	if back.PublicKeyHex() != id.PublicKeyHex() {
		t.Errorf("round trip pub %s != %s", back.PublicKeyHex(), id.PublicKeyHex())
	}
	if len(id.PublicKeyHex()) != 64 || len(id.SecretKeyHex()) != 128 {
		t.Errorf("bad hex lengths")
	}
	other, err := GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	if other.PublicKeyHex() == id.PublicKeyHex() {
		t.Error("two generated identities are equal")
	}
}

func TestIdentityFormattingHidesSecret(t *testing.T) {
	id := mustIdentity(t, secret0)
	seed := secret0[:64]
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(verb, id)
		if strings.Contains(out, seed) || !strings.Contains(out, pub0) {
			t.Errorf("%s formats as %q", verb, out)
		}
	}
}

func TestParsePublicKey(t *testing.T) {
	pk, err := ParsePublicKey(strings.ToUpper(pub0))
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(pk) != pub0 {
		t.Errorf("got %x", pk)
	}
}

func TestParsePublicKeyErrors(t *testing.T) {
	tests := map[string]string{
		"empty":             "",
		"too short":         pub0[:62],
		"too long":          pub0 + "00",
		"not hex":           "g" + pub0[1:],
		"not a point":       "02" + strings.Repeat("0", 62),
		"non-canonical y=p": "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"identity":          "01" + strings.Repeat("0", 62),
		"order 2":           "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"order 4":           strings.Repeat("0", 64),
		"order 8":           order8Point,
		"mixed order":       mixedOrderPoint(t),
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := ParsePublicKey(in); !errors.Is(err, ErrBadPublicKey) {
				t.Fatalf("err = %v, want ErrBadPublicKey", err)
			}
		})
	}
}
