package pathglob

import (
	"strings"
	"unicode/utf8"
)

// Overlap decides whether two patterns cover a common path, and returns
// one such path (a witness both Covers accept) when they do.
//
// The decision is exact. A pattern covers a path when one of its
// alternatives (a directory's ending in `**`) matches it, so two patterns
// overlap when two of their alternatives match a common path. That is the
// intersection of two regular languages over
// segments, decided by a search over pairs of positions (i in a, j in b):
// a globstar matches nothing more (i+1) or takes the other side's next
// segment (j+1); two segment globs must match a common segment. Two
// segment globs are decided the same way over their tokens: a star
// matches nothing more or takes the other side's next character; two
// character sets must share a rune (sharedRune, exact over ranges and
// their complements). Every step keeps a witness, so that a "yes" can be
// checked against the matcher (doublestar); each search is memoised, so
// it costs the product of the two lengths.
func Overlap(a, b *Pattern) (string, bool) {
	for _, x := range a.alts {
		for _, y := range b.alts {
			if w, ok := overlapSegs(x.segs, y.segs); ok {
				return w, true
			}
		}
	}
	return "", false
}

func overlapSegs(a, b []segment) (string, bool) {
	s := &segSearch{a: a, b: b, seen: map[[2]int]bool{}}
	path, ok := s.from(0, 0)
	if !ok {
		return "", false
	}
	if len(path) == 0 { // both were globstars only: any path
		path = []string{"x"}
	}
	return strings.Join(path, "/"), true
}

// segSearch looks for a common path of two segment lists; seen holds the
// positions already found to lead nowhere.
type segSearch struct {
	a, b []segment
	seen map[[2]int]bool
}

// from returns the rest of a common path from positions i and j.
func (s *segSearch) from(i, j int) ([]string, bool) {
	if i == len(s.a) && j == len(s.b) {
		return nil, true
	}
	if s.seen[[2]int{i, j}] {
		return nil, false
	}
	s.seen[[2]int{i, j}] = true
	if i < len(s.a) && s.a[i].globstar {
		if rest, ok := s.from(i+1, j); ok {
			return rest, true
		}
		if j < len(s.b) {
			if rest, ok := s.take(i, j+1, s.b[j]); ok {
				return rest, true
			}
		}
	}
	if j < len(s.b) && s.b[j].globstar {
		if rest, ok := s.from(i, j+1); ok {
			return rest, true
		}
		if i < len(s.a) {
			if rest, ok := s.take(i+1, j, s.a[i]); ok {
				return rest, true
			}
		}
	}
	if i < len(s.a) && j < len(s.b) && !s.a[i].globstar && !s.b[j].globstar {
		if seg, ok := overlapToks(s.a[i].toks, s.b[j].toks); ok {
			if rest, ok := s.from(i+1, j+1); ok {
				return append([]string{seg}, rest...), true
			}
		}
	}
	return nil, false
}

// take is a globstar taking one segment that seg matches, then the search
// from i and j.
func (s *segSearch) take(i, j int, seg segment) ([]string, bool) {
	name := "x"
	if !seg.globstar {
		name, _ = overlapToks(seg.toks, []token{{star: true}}) // every segment has a name (Parse)
	}
	if rest, ok := s.from(i, j); ok {
		return append([]string{name}, rest...), true
	}
	return nil, false
}

// nameForms are three globs whose union is every segment name git can
// have — anything but "", "." and "..": a first character not '.', a
// second not '.', or three characters at least.
var nameForms = [][]token{
	{{set: notDot}, {star: true}},
	{{set: anyRune}, {set: notDot}, {star: true}},
	{{set: anyRune}, {set: anyRune}, {set: anyRune}, {star: true}},
}

var (
	anyRune = charSet{neg: true}
	notDot  = charSet{neg: true, ranges: []runeRange{{'.', '.'}}}
)

// overlapToks decides whether two segment globs match a common segment
// name, and returns it: the search runs on the two globs and each of the
// nameForms in turn.
func overlapToks(a, b []token) (string, bool) {
	for _, form := range nameForms {
		s := &tokSearch{seqs: [3][]token{a, b, form}, seen: map[[3]int]bool{}}
		if name, ok := s.from([3]int{}); ok {
			return name, true
		}
	}
	return "", false
}

// tokSearch looks for a string three token lists all match; seen holds
// the positions already found to lead nowhere.
type tokSearch struct {
	seqs [3][]token
	seen map[[3]int]bool
}

// from returns the rest of a common string from positions pos: a star
// may match nothing more (its list moves on alone), or every list takes
// one character together — a star keeping its place, a character token
// moving on — that each character token's set holds.
func (s *tokSearch) from(pos [3]int) (string, bool) {
	done := true
	for q, p := range pos {
		done = done && p == len(s.seqs[q])
	}
	if done {
		return "", true
	}
	if s.seen[pos] {
		return "", false
	}
	s.seen[pos] = true
	for q, p := range pos {
		if p < len(s.seqs[q]) && s.seqs[q][p].star {
			next := pos
			next[q]++
			if rest, ok := s.from(next); ok {
				return rest, true
			}
		}
	}
	next, sets := pos, make([]charSet, 0, len(pos))
	for q, p := range pos {
		if p == len(s.seqs[q]) {
			return "", false
		}
		if t := s.seqs[q][p]; !t.star {
			next[q]++
			sets = append(sets, t.set)
		}
	}
	r, ok := sharedRune(sets...)
	if !ok || next == pos {
		return "", false
	}
	rest, ok := s.from(next)
	return string(r) + rest, ok
}

// has reports whether r is in the set ('/' and runes that are not valid
// never are).
func (c charSet) has(r rune) bool {
	if r == '/' || !utf8.ValidRune(r) {
		return false
	}
	in := false
	for _, rg := range c.ranges {
		if rg.lo <= r && r <= rg.hi {
			in = true
			break
		}
	}
	return in != c.neg
}

// sharedRune finds a rune in every set. Each set is a finite union of
// ranges or its complement, so their intersection is a finite union of
// ranges, each of which starts at 0, at a range's lo or just after a
// range's hi (of a set, or of the runes excluded: '/' and the
// surrogates): trying those points, printable ones first, is exact.
func sharedRune(sets ...charSet) (rune, bool) {
	cands := []rune{'a', 'x', '0', '_', '-', 0xE000}
	for _, set := range sets {
		for _, rg := range set.ranges {
			cands = append(cands, rg.lo, rg.hi+1)
		}
	}
	cands = append(cands, 0, '/'+1, 0xDFFF+1, 0x10000)
next:
	for _, r := range cands {
		for _, set := range sets {
			if !set.has(r) {
				continue next
			}
		}
		return r, true
	}
	return 0, false
}
