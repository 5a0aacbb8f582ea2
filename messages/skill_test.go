package messages

import (
	"errors"
	"strings"
	"testing"
)

func TestValidSkillName(t *testing.T) {
	for name, want := range map[string]bool{
		"deploy": true, "a": true, "0day": true, "review_pr.v2-final": true, strings.Repeat("a", 64): true,
		"": false, "Deploy": false, "-x": false, ".x": false, "_x": false, "a b": false, "a/b": false, "é": false,
		strings.Repeat("a", 65): false, "a\n": false,
	} {
		if got := ValidSkillName(name); got != want {
			t.Errorf("ValidSkillName(%q) = %v, want %v", name, got, want)
		}
	}
}

// FuzzSkillPublishRequest: the body of POST /v1/skills decodes and
// validates without panicking, refuses only with a 400 *Error, and what
// it accepts has a valid name and some content.
func FuzzSkillPublishRequest(f *testing.F) {
	for _, seed := range []string{
		`{"name":"deploy","content":"1. tag\n2. push","description":"Ship","tags":["ops"],"mesh":"demo"}`,
		`{"name":"Deploy","content":"x"}`,
		`{"name":"deploy","content":"  "}`,
		`{"name":"deploy","content":"x","extra":1}`,
		`{"name":7}`,
		`[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req SkillPublishRequest
		err := DecodeJSON(body, &req)
		if err == nil {
			err = req.Validate()
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != 400 || e.Code == "" {
				t.Fatalf("refusal is not a 400 *Error: %v", err)
			}
			return
		}
		if !ValidSkillName(req.Name) || strings.TrimSpace(req.Content) == "" {
			t.Fatalf("accepted %q: name %q, content %q", body, req.Name, req.Content)
		}
	})
}
