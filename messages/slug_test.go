package messages

import (
	"strings"
	"testing"
)

// TestValidSlug: a mesh slug's form, at its edges.
func TestValidSlug(t *testing.T) {
	for slug, want := range map[string]bool{
		"local":                 true,
		"team-a_2":              true,
		"0day":                  true,
		strings.Repeat("m", 64): true,
		"":                      false,
		strings.Repeat("m", 65): false,
		"-team":                 false,
		"_team":                 false,
		"Team":                  false,
		"team.a":                false,
		"team/a":                false,
		"team a":                false,
	} {
		if got := ValidSlug(slug); got != want {
			t.Errorf("ValidSlug(%q) = %t, want %t", slug, got, want)
		}
	}
}
