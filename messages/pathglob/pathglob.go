// Package pathglob is the path-pattern language of file reservations:
// gitignore-style patterns relative to a repository's root, which
// github.com/bmatcuk/doublestar matches against paths, and the decision
// whether two patterns can cover one path (overlap.go).
//
// The language, as .gitignore has it:
//
//   - `*` matches any run of characters but `/`, `?` one character but
//     `/`, `[abc]`, `[a-z]` one of a class (`[!…]` or `[^…]`: one not in
//     it, never `/`), `{a,b}` either alternative, `\c` the character c.
//   - A segment that is exactly `**` matches zero or more directories;
//     `**` inside a segment is `*`.
//   - A pattern with a `/` at its start or in its middle is anchored at
//     the repository's root (`src/*.go`, `/README.md`); one without
//     matches at any depth (`*.md` is `**/*.md`).
//   - A pattern names files, and a directory with everything below it
//     when it ends in `/` or `/**`, or its last segment is a plain name
//     with no '.' but at its start: `src`, `src/` and `.github` cover what
//     is below them, as an ignored directory ignores its content (`src`
//     covers a file named src too). A last segment with a wildcard, or a
//     name with an extension, names what it matches only: `*.py` covers
//     `a/x.py` but not `x.py/y.go`, `src/app.py` not `src/app.py/x`, where
//     .gitignore would ignore the content of a directory of that name —
//     so that `*.py` and `*.go`, or `src/app.py` and `Makefile`, do not
//     overlap. Write `v1.2/` for a directory whose name has a dot.
//   - Paths are compared as git stores them: case-sensitive, `/`-separated.
//
// Refused (ErrInvalid): negation (`!` at the start), `.` and `..`
// segments, empty segments (`a//b`), a class holding `/`, control
// characters, unbalanced braces, a pattern over MaxPatternBytes or with
// more than MaxAlternatives brace alternatives.
package pathglob

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

// Limits of one pattern.
const (
	MaxPatternBytes = 256
	MaxAlternatives = 64
	MaxSegments     = 64
	MaxPathBytes    = 4096
)

// ErrInvalid wraps every refusal of a pattern or a path.
var ErrInvalid = errors.New("invalid path pattern")

// Pattern is a parsed pattern: the text as given, and its alternatives
// (one per brace expansion), each anchored at the root.
type Pattern struct {
	Text string
	alts []alternative
}

// alternative is one brace-free pattern: its segments (a directory's
// ending in a globstar), and its rendering in doublestar's syntax.
type alternative struct {
	segs    []segment
	renders []string
}

// segment is a `**` (globstar) or a glob over one path segment.
type segment struct {
	globstar bool
	toks     []token
}

// token is one element of a segment glob: a star, or a character of a
// set (a literal is a set of one, `?` the negated empty set).
type token struct {
	star bool
	set  charSet
}

// charSet is a set of runes: the ranges, or (neg) every rune but them.
// '/' is never in it.
type charSet struct {
	neg    bool
	ranges []runeRange
}

type runeRange struct{ lo, hi rune }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Parse reads one pattern.
func Parse(text string) (*Pattern, error) {
	switch {
	case text == "":
		return nil, invalid("a pattern is not empty (** is the whole repository)")
	case len(text) > MaxPatternBytes:
		return nil, invalid("a pattern is at most %d bytes, got %d", MaxPatternBytes, len(text))
	case !utf8.ValidString(text) || strings.IndexFunc(text, unicode.IsControl) >= 0:
		return nil, invalid("%q is not UTF-8 without control characters", text)
	case text[0] == '!':
		return nil, invalid("%q: negation (a leading !) is not supported in a reservation; write \\! for a name that starts with !", text)
	}
	rootAnchored := text[0] == '/'
	p := &parser{src: []rune(strings.TrimPrefix(text, "/"))}
	seqs, err := p.sequence(0)
	if err != nil {
		return nil, invalid("%q: %v", text, err)
	}
	if p.pos < len(p.src) {
		return nil, invalid("%q: an unmatched } (escape it as \\})", text)
	}
	out := &Pattern{Text: text}
	for _, seq := range seqs {
		alt, err := newAlternative(seq, rootAnchored)
		if err != nil {
			return nil, invalid("%q: %v", text, err)
		}
		out.alts = append(out.alts, alt)
	}
	return out, nil
}

// item is one parsed element before segments are split: a token, or a
// separator.
type item struct {
	sep bool
	tok token
}

// parser expands braces and reads classes and escapes.
type parser struct {
	src []rune
	pos int
}

// sequence reads items up to the end, or (depth > 0) a ',' or '}' it
// leaves unread, and returns every expansion.
func (p *parser) sequence(depth int) ([][]item, error) {
	out := [][]item{{}}
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if depth > 0 && (c == ',' || c == '}') {
			break
		}
		if c == '}' {
			return nil, errors.New("an unmatched } (escape it as \\})")
		}
		var next [][]item
		if c == '{' {
			alts, err := p.braces(depth)
			if err != nil {
				return nil, err
			}
			next = alts
		} else {
			it, err := p.item()
			if err != nil {
				return nil, err
			}
			next = [][]item{{it}}
		}
		if len(out)*len(next) > MaxAlternatives {
			return nil, fmt.Errorf("more than %d alternatives once its braces are expanded", MaxAlternatives)
		}
		var grown [][]item
		for _, a := range out {
			for _, b := range next {
				grown = append(grown, append(append([]item(nil), a...), b...))
			}
		}
		out = grown
	}
	return out, nil
}

// braces reads {alt,alt,...} and returns the union of its alternatives.
func (p *parser) braces(depth int) ([][]item, error) {
	p.pos++ // '{'
	var out [][]item
	for {
		alts, err := p.sequence(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, alts...)
		if len(out) > MaxAlternatives {
			return nil, fmt.Errorf("more than %d alternatives once its braces are expanded", MaxAlternatives)
		}
		if p.pos >= len(p.src) {
			return nil, errors.New("a { without its } (escape it as \\{)")
		}
		c := p.src[p.pos]
		p.pos++
		if c == '}' {
			return out, nil
		}
	}
}

// item reads one separator, star, '?', class or (escaped) literal.
func (p *parser) item() (item, error) {
	c := p.src[p.pos]
	p.pos++
	switch c {
	case '/':
		return item{sep: true}, nil
	case '*':
		return item{tok: token{star: true}}, nil
	case '?':
		return item{tok: token{set: charSet{neg: true}}}, nil
	case '[':
		set, err := p.class()
		return item{tok: token{set: set}}, err
	case '\\':
		if p.pos >= len(p.src) {
			return item{}, errors.New("a \\ at the end escapes nothing")
		}
		c = p.src[p.pos]
		p.pos++
		if c == '/' {
			return item{}, errors.New("/ cannot be escaped: it separates directories")
		}
	}
	return item{tok: token{set: charSet{ranges: []runeRange{{c, c}}}}}, nil
}

// class reads a character class after its '['.
func (p *parser) class() (charSet, error) {
	var set charSet
	if p.pos < len(p.src) && (p.src[p.pos] == '!' || p.src[p.pos] == '^') {
		set.neg = true
		p.pos++
	}
	for first := true; ; first = false {
		if p.pos >= len(p.src) {
			return set, errors.New("a [ without its ] (escape it as \\[)")
		}
		if p.src[p.pos] == ']' {
			if first {
				return set, errors.New("an empty character class []")
			}
			p.pos++
			return set, nil
		}
		lo, err := p.classRune()
		if err != nil {
			return set, err
		}
		hi := lo
		if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			if hi, err = p.classRune(); err != nil {
				return set, err
			}
			if hi < lo {
				return set, fmt.Errorf("the range %c-%c is backwards", lo, hi)
			}
		}
		if lo <= '/' && '/' <= hi {
			return set, errors.New("a character class cannot hold / (it separates directories)")
		}
		set.ranges = append(set.ranges, runeRange{lo, hi})
	}
}

func (p *parser) classRune() (rune, error) {
	c := p.src[p.pos]
	p.pos++
	if c == '\\' {
		if p.pos >= len(p.src) {
			return 0, errors.New("a [ without its ] (escape it as \\[)")
		}
		c = p.src[p.pos]
		p.pos++
	}
	return c, nil
}

// newAlternative splits an expansion into segments: one without a
// separator but at its end, not anchored by a leading '/', matches at any
// depth; a directory (a trailing separator, or a last segment isDirName)
// ends in a globstar.
func newAlternative(items []item, rootAnchored bool) (alternative, error) {
	dir := false
	if n := len(items); n > 0 && items[n-1].sep {
		items, dir = items[:n-1], true
	}
	var segs []segment
	cur := segment{}
	flush := func() error {
		if len(cur.toks) == 0 {
			return errors.New("an empty segment (// or a / at the start of a brace alternative)")
		}
		if lit := literal(cur.toks); lit == "." || lit == ".." {
			return fmt.Errorf("a %s segment: name paths from the repository's root, with no . or .. segment in them", lit)
		}
		seg := compact(cur)
		if _, ok := overlapToks(seg.toks, []token{{star: true}}); !seg.globstar && !ok {
			return fmt.Errorf("segment %d matches no name a file can have (only . or ..)", len(segs)+1)
		}
		segs = append(segs, seg)
		cur = segment{}
		return nil
	}
	for _, it := range items {
		if it.sep {
			if err := flush(); err != nil {
				return alternative{}, err
			}
			continue
		}
		cur.toks = append(cur.toks, it.tok)
	}
	if err := flush(); err != nil {
		return alternative{}, err
	}
	segs = slices.CompactFunc(segs, func(x, y segment) bool { return x.globstar && y.globstar })
	if len(segs) == 1 && !rootAnchored && !segs[0].globstar {
		segs = append([]segment{{globstar: true}}, segs...)
	}
	if last := segs[len(segs)-1]; !last.globstar && (dir || isDirName(literal(last.toks))) {
		segs = append(segs, segment{globstar: true})
	}
	if len(segs) > MaxSegments {
		return alternative{}, fmt.Errorf("more than %d segments", MaxSegments)
	}
	alt := alternative{segs: segs, renders: []string{render(segs)}}
	if n := len(segs); n > 1 && segs[n-1].globstar {
		// doublestar's trailing /** matches no segment after most
		// segments (src/** matches src) but not after one ending in a
		// star (x/0*/** misses x/0): the pattern without it is asked too.
		alt.renders = append(alt.renders, render(segs[:n-1]))
	}
	return alt, nil
}

// Prefix is the directory every path the pattern covers lies in (or is):
// the leading segments of literal characters its alternatives share,
// joined by `/`; "" when it can cover a path anywhere. Two patterns can
// overlap only when one's prefix is the other's or a directory of it
// (PrefixesMeet), which lets a store find the reservations a request can
// conflict with by an index instead of comparing every one.
func (p *Pattern) Prefix() string {
	var common []string
	for i, a := range p.alts {
		var lits []string
		for _, s := range a.segs {
			lit := literal(s.toks)
			if s.globstar || lit == "" {
				break
			}
			lits = append(lits, lit)
		}
		if i == 0 {
			common = lits
			continue
		}
		n := 0
		for n < len(common) && n < len(lits) && common[n] == lits[n] {
			n++
		}
		common = common[:n]
	}
	return strings.Join(common, "/")
}

// PrefixesMeet reports whether two prefixes (Prefix) are one and the same
// directory, or one is within the other: only then can their patterns
// overlap.
func PrefixesMeet(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return a == "" || a == b || strings.HasPrefix(b, a+"/")
}

// isDirName reports whether a pattern's plain last segment names a
// directory too: a name with no '.' but at its start.
func isDirName(name string) bool {
	return name != "" && !strings.Contains(name[1:], ".")
}

// literal is the segment's text when it is literal characters only.
func literal(toks []token) string {
	var b strings.Builder
	for _, t := range toks {
		if t.star || t.set.neg || len(t.set.ranges) != 1 || t.set.ranges[0].lo != t.set.ranges[0].hi {
			return ""
		}
		b.WriteRune(t.set.ranges[0].lo)
	}
	return b.String()
}

// compact merges runs of stars (a `**` inside a segment is a `*`) and
// marks a segment of stars only, from a `**`, as a globstar.
func compact(s segment) segment {
	var toks []token
	stars := 0
	for _, t := range s.toks {
		if t.star {
			stars++
			if len(toks) > 0 && toks[len(toks)-1].star {
				continue
			}
		}
		toks = append(toks, t)
	}
	if len(toks) == 1 && toks[0].star && stars >= 2 {
		return segment{globstar: true}
	}
	return segment{toks: toks}
}

// render writes segments in doublestar's syntax, every literal and class
// member escaped, and '/' added to every negated class.
func render(segs []segment) string {
	var b strings.Builder
	for i, s := range segs {
		if i > 0 {
			b.WriteByte('/')
		}
		if s.globstar {
			b.WriteString("**")
			continue
		}
		for _, t := range s.toks {
			switch {
			case t.star:
				b.WriteByte('*')
			case t.set.neg && len(t.set.ranges) == 0:
				b.WriteByte('?')
			case !t.set.neg && len(t.set.ranges) == 1 && t.set.ranges[0].lo == t.set.ranges[0].hi:
				writeEscaped(&b, t.set.ranges[0].lo)
			default:
				b.WriteByte('[')
				if t.set.neg {
					b.WriteString(`^\/`)
				}
				for _, r := range t.set.ranges {
					writeEscaped(&b, r.lo)
					if r.hi != r.lo {
						b.WriteByte('-')
						writeEscaped(&b, r.hi)
					}
				}
				b.WriteByte(']')
			}
		}
	}
	return b.String()
}

func writeEscaped(b *strings.Builder, r rune) {
	if r < utf8.RuneSelf && !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_') {
		b.WriteByte('\\')
	}
	b.WriteRune(r)
}

// CheckPath refuses what is not a path git would name in a repository: a
// clean relative path of non-empty segments, no . or .., no NUL.
func CheckPath(path string) error {
	if path == "" || len(path) > MaxPathBytes || !utf8.ValidString(path) || strings.ContainsRune(path, 0) {
		return invalid("a path is 1-%d bytes of UTF-8 without NUL, got %q", MaxPathBytes, path)
	}
	for seg := range strings.SplitSeq(path, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return invalid("%q is not a clean path relative to the repository's root (no leading /, //, . or ..)", path)
		}
	}
	return nil
}

// Covers reports whether the pattern covers path (a path CheckPath
// accepts): whether doublestar matches one of its alternatives.
func (p *Pattern) Covers(path string) bool {
	for _, a := range p.alts {
		for _, r := range a.renders {
			if doublestar.MatchUnvalidated(r, path) {
				return true
			}
		}
	}
	return false
}

// String is the pattern as given.
func (p *Pattern) String() string { return p.Text }
