package meshcrypto

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
)

// vector is one entry of testdata/dm-crypto-vectors.json, produced by
// libsodium-wrappers 0.7.15. Fields are filled according to Kind.
type vector struct {
	Kind string `json:"kind"`

	// dm_box
	SenderSecretHex       string `json:"sender_ed25519_secret_hex"`
	SenderPubHex          string `json:"sender_ed25519_pub_hex"`
	RecipientPubHex       string `json:"recipient_ed25519_pub_hex"`
	RecipientSecretHex    string `json:"recipient_ed25519_secret_hex"`
	SenderX25519SecretHex string `json:"sender_x25519_secret_hex"`
	RecipientX25519PubHex string `json:"recipient_x25519_pub_hex"`
	PlaintextUTF8         string `json:"plaintext_utf8"`
	NonceB64              string `json:"nonce_b64"`
	CiphertextB64         string `json:"ciphertext_b64"`

	// hello_signature
	SecretHex    string `json:"secret_hex"`
	PubkeyHex    string `json:"pubkey_hex"`
	SignedUTF8   string `json:"signed_utf8"`
	SignatureHex string `json:"signature_hex"`
}

func loadVectors(tb testing.TB) []vector {
	tb.Helper()
	raw, err := os.ReadFile("testdata/dm-crypto-vectors.json")
	if err != nil {
		tb.Fatal(err)
	}
	var file struct {
		Vectors []vector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		tb.Fatal(err)
	}
	if len(file.Vectors) == 0 {
		tb.Fatal("no vectors")
	}
	return file.Vectors
}

func mustIdentity(tb testing.TB, secretHex string) *Identity {
	tb.Helper()
	id, err := ParseIdentity(secretHex)
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

// TestVectors reproduces every libsodium vector byte for byte and fails on
// any vector kind it does not know, so new kinds cannot be skipped silently.
func TestVectors(t *testing.T) {
	checks := map[string]func(*testing.T, vector){
		"dm_box":          checkDMBox,
		"hello_signature": checkHelloSignature,
	}
	seen := map[string]int{}
	for i, v := range loadVectors(t) {
		check, ok := checks[v.Kind]
		if !ok {
			t.Fatalf("vector %d: unhandled kind %q", i, v.Kind)
		}
		seen[v.Kind]++
		t.Run(v.Kind+"/"+strconv.Itoa(i), func(t *testing.T) { check(t, v) })
	}
	for kind := range checks {
		if seen[kind] == 0 {
			t.Errorf("no vectors of kind %q", kind)
		}
	}
}

func checkDMBox(t *testing.T, v vector) {
	sender := mustIdentity(t, v.SenderSecretHex)
	recipient := mustIdentity(t, v.RecipientSecretHex)
	if got := sender.PublicKeyHex(); got != v.SenderPubHex {
		t.Errorf("sender pub = %s, want %s", got, v.SenderPubHex)
	}
	if got := recipient.PublicKeyHex(); got != v.RecipientPubHex {
		t.Errorf("recipient pub = %s, want %s", got, v.RecipientPubHex)
	}
	if got := hex.EncodeToString(sender.x25519Secret()[:]); got != v.SenderX25519SecretHex {
		t.Errorf("sender x25519 secret = %s, want %s", got, v.SenderX25519SecretHex)
	}
	p, err := parsePoint(v.RecipientPubHex)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(x25519Public(p)[:]); got != v.RecipientX25519PubHex {
		t.Errorf("recipient x25519 pub = %s, want %s", got, v.RecipientX25519PubHex)
	}

	nonce := decodeNonceForTest(t, v.NonceB64)
	gotNonce, gotCT, err := sender.SealDMWithNonce(v.RecipientPubHex, []byte(v.PlaintextUTF8), nonce)
	if err != nil {
		t.Fatal(err)
	}
	if gotNonce != v.NonceB64 || gotCT != v.CiphertextB64 {
		t.Errorf("SealDMWithNonce = (%s, %s), want (%s, %s)", gotNonce, gotCT, v.NonceB64, v.CiphertextB64)
	}
	msg, err := recipient.OpenDM(v.SenderPubHex, v.NonceB64, v.CiphertextB64)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg) != v.PlaintextUTF8 {
		t.Errorf("OpenDM = %q, want %q", msg, v.PlaintextUTF8)
	}
}

func checkHelloSignature(t *testing.T, v vector) {
	id := mustIdentity(t, v.SecretHex)
	if got := id.PublicKeyHex(); got != v.PubkeyHex {
		t.Errorf("pub = %s, want %s", got, v.PubkeyHex)
	}
	fields := strings.Split(v.SignedUTF8, "|")
	if len(fields) != 4 || fields[2] != v.PubkeyHex {
		t.Fatalf("unexpected signed string %q", v.SignedUTF8)
	}
	meshID, memberID := fields[0], fields[1]
	ts, err := strconv.ParseInt(fields[3], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(helloMessage(meshID, memberID, v.PubkeyHex, ts)); got != v.SignedUTF8 {
		t.Errorf("signed bytes = %q, want %q", got, v.SignedUTF8)
	}
	if got := HelloSignature(id, meshID, memberID, ts); got != v.SignatureHex {
		t.Errorf("HelloSignature = %s, want %s", got, v.SignatureHex)
	}
	for _, sig := range []string{v.SignatureHex, strings.ToUpper(v.SignatureHex)} {
		if err := VerifyHello(v.PubkeyHex, meshID, memberID, ts, sig); err != nil {
			t.Errorf("VerifyHello(%s): %v", sig, err)
		}
	}
}

func decodeNonceForTest(tb testing.TB, s string) *[NonceSize]byte {
	tb.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != NonceSize {
		tb.Fatalf("bad test nonce %q: %v", s, err)
	}
	return (*[NonceSize]byte)(b)
}
