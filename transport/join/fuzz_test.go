package join

import (
	"errors"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

// FuzzParseLink: any input is a link of one form or ErrBadInviteLink,
// and any token then checks or fails with one of the three invite errors;
// nothing panics. Seeds: testdata/fuzz/FuzzParseLink.
func FuzzParseLink(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string) {
		l, err := ParseLink(raw)
		if err != nil {
			if !errors.Is(err, ErrBadInviteLink) {
				t.Fatalf("ParseLink(%q): %v", raw, err)
			}
			return
		}
		if (l.Token == "") == (l.CodeURL == "") {
			t.Fatalf("ParseLink(%q) = %+v: want a token or a code URL", raw, l)
		}
		if l.CodeURL != "" {
			if !strings.HasPrefix(l.CodeURL, "https://") || !strings.Contains(l.CodeURL, CodePath) {
				t.Fatalf("ParseLink(%q): code URL %q", raw, l.CodeURL)
			}
			return
		}
		if !token.MatchString(l.Token) || !strings.Contains(raw, l.Token) {
			t.Fatalf("ParseLink(%q): token %q", raw, l.Token)
		}
		inv, err := Check(l.Token, vectorNow)
		switch {
		case err == nil:
			if inv.Payload.VerifySignature() != nil || !strings.HasPrefix(inv.JoinURL, "http") {
				t.Fatalf("Check(%q) = %+v", l.Token, inv)
			}
		case !errors.Is(err, messages.ErrInviteMalformed) && !errors.Is(err, messages.ErrInviteExpired) &&
			!errors.Is(err, messages.ErrInviteSignature):
			t.Fatalf("Check(%q): %v", l.Token, err)
		}
	})
}
