package messages

import (
	"slices"
	"strings"
	"testing"
)

func TestSearchTerms(t *testing.T) {
	for q, want := range map[string][]string{
		"Flaky TEST flaky":          {"flaky", "test"},
		`'; DROP TABLE x; --`:       {"drop", "table", "x"},
		`NEAR("a b", 2) OR c*`:      {"near", "a", "b", "2", "or", "c"},
		"café naïve":                {"café", "naïve"},
		"":                          nil,
		`"*-^():`:                   nil,
		strings.Repeat("w ", 100):   {"w"},
		"e\u0301t\u00e9 2026-11-25": {"e\u0301t\u00e9", "2026", "11", "25"},
	} {
		if got := SearchTerms(q, 32); !slices.Equal(got, want) {
			t.Errorf("SearchTerms(%q) = %q, want %q", q, got, want)
		}
	}
	many := make([]string, 40)
	for i := range many {
		many[i] = strings.Repeat("z", i+1)
	}
	if got := SearchTerms(strings.Join(many, " "), 32); len(got) != 32 {
		t.Errorf("%d terms of 40 words, want %d", len(got), 32)
	}
}
