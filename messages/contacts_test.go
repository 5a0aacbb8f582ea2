package messages

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzContactPolicyRequest: a POST /v1/contacts/policy body decodes and
// validates to a policy and TTL within bounds, or is a coded 4xx.
func FuzzContactPolicyRequest(f *testing.F) {
	f.Add([]byte(`{"policy":"contacts_only","request_ttl":"72h","mesh":"m"}`))
	f.Add([]byte(`{"policy":"open","request_ttl":"1s"}`))
	f.Add([]byte(`{"policy":"block_all","request_ttl":"-5m","polcy":"x"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req ContactPolicyRequest
		err := DecodeJSON(body, &req)
		if err == nil {
			err = req.Validate()
		}
		if err != nil {
			var me *Error
			if !errors.As(err, &me) || me.Code == "" || me.Status < 400 || me.Status > 499 {
				t.Fatalf("not a coded 4xx: %v", err)
			}
			return
		}
		ttl := req.TTL()
		if CheckPolicy(req.Policy) != nil || req.RequestTTL != "" && (ttl < MinContactRequestTTL || ttl > MaxContactRequestTTL) {
			t.Fatalf("accepted %+v (ttl %v)", req, ttl)
		}
	})
}

// TestContactRequests: the policy and decision bodies refuse what they
// must, each with its code.
func TestContactRequests(t *testing.T) {
	for _, c := range []struct {
		req  interface{ Validate() error }
		code string
	}{
		{&ContactPolicyRequest{Policy: "closed"}, CodeInvalidPolicy},
		{&ContactPolicyRequest{Policy: PolicyAuto, RequestTTL: "30s"}, CodeInvalidTTL},
		{&ContactPolicyRequest{Policy: PolicyAuto, RequestTTL: (91 * 24 * time.Hour).String()}, CodeInvalidTTL},
		{&ContactPolicyRequest{Policy: PolicyAuto, RequestTTL: "soon"}, CodeInvalidTTL},
		{&ContactDecisionRequest{Peer: "  "}, CodeMissingPeer},
		{&ContactPolicyRequest{Policy: PolicyContactsOnly, RequestTTL: "1h"}, ""},
		{&ContactDecisionRequest{Peer: "carol"}, ""},
	} {
		err := c.req.Validate()
		var me *Error
		if c.code == "" && err != nil || c.code != "" && (!errors.As(err, &me) || me.Code != c.code) {
			t.Errorf("%+v: %v, want %q", c.req, err, c.code)
		}
	}
}

func TestDurationWords(t *testing.T) {
	for d, want := range map[time.Duration]string{
		7 * 24 * time.Hour: "7 days", 24 * time.Hour: "1 day", 36 * time.Hour: "36 hours", time.Hour: "1 hour",
		90 * time.Minute: "90 minutes", time.Minute: "1 minute", 90 * time.Second: "90 seconds", 1500 * time.Millisecond: "1.5s",
		0: "0s",
	} {
		if got := DurationWords(d); got != want {
			t.Errorf("DurationWords(%v) = %q, want %q", d, got, want)
		}
	}
	if got := (&Contacts{RequestTTL: "168h0m0s"}).RequestWait(); got != "7 days" {
		t.Errorf("RequestWait(168h0m0s) = %q", got)
	}
}

func TestContactDisplayName(t *testing.T) {
	key := strings.Repeat("ab", 32)
	names := map[string]string{key: "alice"}
	for _, c := range []struct{ recorded, want string }{{"", "alice"}, {key[:8], "alice"}, {"al", "al"}, {"bob", "bob"}} {
		if got := (&Contact{Pubkey: key, Name: c.recorded}).DisplayName(names); got != c.want {
			t.Errorf("recorded %q: DisplayName = %q, want %q", c.recorded, got, c.want)
		}
	}
	if got := (&Contact{Pubkey: key, Name: key[:8]}).DisplayName(nil); got != key[:8] {
		t.Errorf("no peer list: %q", got)
	}
}
