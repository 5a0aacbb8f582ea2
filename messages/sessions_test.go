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
