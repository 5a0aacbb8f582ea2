package messages

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSessionNameBase(t *testing.T) {
	long := strings.Repeat("é", 40) // 80 bytes
	for cwd, want := range map[string]string{
		"/home/ada/claudemesh-go": "claudemesh-go",
		"/":                       "agent",
		"":                        "agent",
		"/tmp/a\x07b\x7fc":        "abc",
		"/x/" + long:              strings.Repeat("é", 24),
	} {
		got := SessionNameBase(cwd)
		if got != want || !utf8.ValidString(got) || len(got) > 48 {
			t.Errorf("SessionNameBase(%q) = %q, want %q", cwd, got, want)
		}
	}
}

// TestValidSessionID: the form the session registry and the hook receiver
// share (Claude Code's UUIDs, Codex's thread ids, names a launch gives).
func TestValidSessionID(t *testing.T) {
	for id, want := range map[string]bool{
		"3f1c2b9e-7a4d-4e8b-9c1f-0a2b3c4d5e6f": true,
		"019a0c3e-codex.thread_7":              true,
		"A":                                    true,
		strings.Repeat("a", 128):               true,
		"":                                     false,
		strings.Repeat("a", 129):               false,
		"-leading-dash":                        false,
		".hidden":                              false,
		"../../etc":                            false,
		"has space":                            false,
		"slash/inside":                         false,
		"ünïcode":                              false,
	} {
		if got := ValidSessionID(id); got != want {
			t.Errorf("ValidSessionID(%q) = %t, want %t", id, got, want)
		}
	}
}
