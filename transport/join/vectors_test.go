package join

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// vectors is testdata/invite-v1-vectors.json (wire-protocol §3.7).
type vectors struct {
	OwnerPubkey string `json:"owner_pubkey"`
	Vectors     []struct {
		Name      string   `json:"name"`
		OwnerSeed string   `json:"owner_seed_hex"`
		Canonical string   `json:"canonical"`
		Signature string   `json:"signature"`
		JSON      string   `json:"json"`
		Token     string   `json:"token"`
		Links     []string `json:"links"`
		Expect    string   `json:"expect"`
	} `json:"vectors"`
}

// vectorNow is when the vectors are checked: after the expired one's
// expiry (2023-11-14), before the others' (2100-01-01).
var vectorNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func loadVectors(t *testing.T) *vectors {
	t.Helper()
	raw, err := os.ReadFile("testdata/invite-v1-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Vectors) != 6 {
		t.Fatalf("%d vectors, want 6", len(v.Vectors))
	}
	return &v
}

// TestInviteVectors: every vector gets the outcome the upstream CLI gives
// it, whatever link form carries it; the valid one is reproduced byte for
// byte by SignInvite from its seed.
func TestInviteVectors(t *testing.T) {
	v := loadVectors(t)
	want := map[string]error{"ok": nil, "bad_signature": messages.ErrInviteSignature,
		"expired": messages.ErrInviteExpired, "malformed": messages.ErrInviteMalformed}
	c := &Client{Now: func() time.Time { return vectorNow }}
	for _, vec := range v.Vectors {
		t.Run(vec.Name, func(t *testing.T) {
			wantErr, ok := want[vec.Expect]
			if !ok {
				t.Fatalf("unknown expectation %q", vec.Expect)
			}
			for _, link := range append([]string{vec.Token}, vec.Links...) {
				inv, err := c.Resolve(context.Background(), link)
				if !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
					t.Fatalf("Resolve(%.40s…) = %v, want %v", link, err, wantErr)
				}
				if err != nil {
					continue
				}
				if inv.Token != vec.Token || inv.Payload.Canonical() != vec.Canonical || inv.Payload.Signature != vec.Signature ||
					inv.Payload.OwnerPubkey != v.OwnerPubkey || inv.JoinURL != "http://127.0.0.1:7900/join" {
					t.Errorf("Resolve(%.40s…) = %+v %+v", link, inv, inv.Payload)
				}
			}
			if vec.OwnerSeed == "" {
				return
			}
			seed, err := hex.DecodeString(vec.OwnerSeed)
			if err != nil {
				t.Fatal(err)
			}
			p, err := messages.DecodeInviteToken(vec.Token)
			if err != nil {
				t.Fatal(err)
			}
			tok, signed, err := messages.SignInvite(*p, ed25519.NewKeyFromSeed(seed))
			if err != nil || tok != vec.Token || signed.Signature != vec.Signature {
				t.Errorf("SignInvite = %s, %v; want the vector's token", tok, err)
			}
		})
	}
}

// TestCheckMessages: each outcome says what is wrong in the words of the
// upstream CLI.
func TestCheckMessages(t *testing.T) {
	v := loadVectors(t)
	want := []string{"", "invite signature invalid (link tampered?)", "invite expired: it expired at 2023-11-14T22:13:20Z",
		"invite signature invalid (link tampered?)", "malformed invite: invite link JSON parse failed: invalid character 'o' in literal false (expecting 'a')",
		"malformed invite: invite payload: role must be admin or member"}
	for i, vec := range v.Vectors {
		_, err := Check(vec.Token, vectorNow)
		if got := ""; err != nil {
			got = err.Error()
			if got != want[i] {
				t.Errorf("%s: %q, want %q", vec.Name, got, want[i])
			}
		}
	}
}
