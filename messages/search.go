package messages

import (
	"slices"
	"strings"
	"unicode"
)

// SearchTerms splits a search query into its words (runs of letters,
// digits and marks, lowercased), at most max of them, each once: all a
// full-text search is made of, so that nothing else in a query — quotes,
// operators, SQL — can be syntax. The broker's memory recall and the
// daemon's inbox search both read queries this way.
func SearchTerms(query string, max int) []string {
	var terms []string
	for _, w := range strings.FieldsFunc(query, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.IsMark(r)
	}) {
		w = strings.ToLower(w)
		if !slices.Contains(terms, w) {
			terms = append(terms, w)
		}
		if len(terms) == max {
			break
		}
	}
	return terms
}
