package pathglob

import (
	"errors"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
)

func mustParse(t testing.TB, s string) *Pattern {
	t.Helper()
	p, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return p
}

// overlapTable is the rule, pair by pair: whether some path is covered by
// both patterns.
var overlapTable = []struct {
	a, b string
	want bool
}{
	{"src/**", "src/app.py", true},
	{"src/**", "docs/*.md", false},
	{"src/**", "src", true},
	{"src", "src/app.py", true}, // a directory covers its content
	{"src/", "src/lib/x.go", true},
	{"src/*.py", "src/app.py", true},
	{"src/*.py", "src/app.go", false},
	{"src/*.py", "src/lib/app.py", false}, // *.py names files, not directories
	{"src/*", "src/a", true},
	{"src/*", "src/a/b", false},
	{"docs/*.md", "docs/guide/intro.md", false},
	{"docs/*.md", "*.md", true}, // *.md matches at any depth
	{"/README.md", "README.md", true},
	{"/README.md", "docs/README.md", false},
	{"README.md", "docs/README.md", true},
	{"**", "anything/at/all", true},
	{"**/*.go", "cmd/main.go", true},
	{"**/*.go", "cmd/*.rs", false},
	{"**/*.go", "cmd/main.rs", false}, // a name with an extension is a file
	{"**/*.go", "cmd/main", true},     // cmd/main/x.go: a plain name may be a directory
	{"src/app.py", "Makefile", false},
	{"Makefile", "src/**", true},
	{".github", ".github/workflows/ci.yml", true},
	{"/v1.2", "v1.2/x", false},
	{"v1.2/", "v1.2/x", true},
	{"**/test/**", "src/test/a.go", true},
	{"**/test/**", "src/tests/*.go", false},
	{"a/**/b", "a/b", true},
	{"a/**/b", "a/x/y/b", true},
	{"a/**/b", "a/x/y/*.c", false},
	{"a/*/c", "a/**/c", true},
	{"a/*/c", "b/c", false},
	{"a/*/c", "a/c", true}, // both cover a/c/c
	{"*.py", "*.go", false},
	{"*.py", "a*", true},
	{"a*b", "*c", false},
	{"a*b", "a*", true},
	{"a?c", "abc", true},
	{"/a?c", "/ac", false},
	{"a?c", "a??c", false},
	{"/[a-c]x", "/bx", true},
	{"/[a-c]x", "/dx", false},
	{"/[!a-c]x", "/bx", false},
	{"/[!a-c]x", "/dx", true},
	{"[!a]", "[!b]", true},
	{"[^ab]", "[ab]", false},
	{"{src,lib}/**", "lib/x.go", true},
	{"{src,lib}/**", "docs/x.go", false},
	{"src/{a,b}.go", "src/c.go", false},
	{"src/{a,b}.go", "src/*.go", true},
	{`src/\*.go`, "src/a.go", false},
	{`src/\*.go`, "src/*.go", true},
	{"src/**/*.ts", "src/*.tsx", false},
	{"src/**/*.ts", "src/**/index.*", true},
	{"x/*/y", "x/*/z", false},
	{"x/*/y", "*/a/*", true},
	{"*/a/*", "a/b", false},
	{"**/a/*", "a/b", true},
	{"/a**b", "a/b", false}, // ** inside a segment is *
	{"a**b", "axyb", true},
	{"a**b", "a/b", true}, // a/b/axb
	{"/.*", "/?", false},  // only "." is both, and no file is named .
	{"/.*", "/??", true},
}

// TestOverlapTable checks the rule on the table, both ways round, and
// that each witness is covered by both patterns (doublestar says so).
func TestOverlapTable(t *testing.T) {
	if len(overlapTable) < 40 {
		t.Fatalf("the table has %d pairs, want at least 40", len(overlapTable))
	}
	for _, c := range overlapTable {
		a, b := mustParse(t, c.a), mustParse(t, c.b)
		for _, pq := range [][2]*Pattern{{a, b}, {b, a}} {
			w, got := Overlap(pq[0], pq[1])
			if got != c.want {
				t.Errorf("Overlap(%q, %q) = %v (%q), want %v", pq[0].Text, pq[1].Text, got, w, c.want)
				continue
			}
			if got && (!pq[0].Covers(w) || !pq[1].Covers(w)) {
				t.Errorf("Overlap(%q, %q): witness %q is not covered by both", pq[0].Text, pq[1].Text, w)
			}
		}
	}
}

// TestCovers: paths covered or not, as the rule says.
func TestCovers(t *testing.T) {
	for _, c := range []struct {
		pattern, path string
		want          bool
	}{
		{"src/**", "src/app.py", true}, {"src/**", "srcx/app.py", false}, {"src", "src/a/b/c", true},
		{"*.md", "docs/a/b.md", true}, {"docs/*.md", "docs/a/b.md", false}, {"/a.md", "b/a.md", false},
		{"/[!x]y", "a/y", false}, {"?", "/", false}, {"a/", "a", true}, {`\{x\}`, "{x}", true},
		{"src/{a,b/c}.go", "src/b/c.go", true}, {"src/{a,b/c}.go", "src/b.go", false}, {"*.py", "x.py/y.go", false}, {"src/app.py", "src/app.py/x", false}, {"src/app", "src/app/x", true},
	} {
		if got := mustParse(t, c.pattern).Covers(c.path); got != c.want {
			t.Errorf("%q covers %q = %v, want %v", c.pattern, c.path, got, c.want)
		}
	}
}

// TestParseRefuses: each refusal is ErrInvalid with a sentence.
func TestParseRefuses(t *testing.T) {
	for _, bad := range []string{"", "!src/**", "a//b", "./a", "a/../b", "..", "[]", "[a", "{a,b", "a}", "a\\", `a\/b`,
		"[a/]", "[z-a]", "src/[.]", "/.[.]/x", "a\x01", "\xff", strings.Repeat("a", 257), strings.Repeat("{a,b}", 7), "/", "{,a}",
		strings.Repeat("a/", 65) + "a"} {
		if p, err := Parse(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %v, %v; want ErrInvalid", bad, p, err)
		}
	}
	for _, bad := range []string{"", "/a", "a//b", "a/./b", "../a", "a/", "a\x00b"} {
		if err := CheckPath(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckPath(%q) = %v", bad, err)
		}
	}
}

// FuzzOverlap checks the decision against the matcher: a witness must be
// covered by both patterns; when the patterns do not overlap, a path each
// covers (its witness against **) must not be covered by the other; an
// anchored pattern with no negated class, brace or ** covers only what doublestar
// matches of it as written, or of it with /** after it.
func FuzzOverlap(f *testing.F) {
	for _, c := range overlapTable {
		f.Add(c.a, c.b)
	}
	everything := mustParse(f, "**")
	f.Fuzz(func(t *testing.T, x, y string) {
		a, errA := Parse(x)
		b, errB := Parse(y)
		if errA != nil || errB != nil {
			return
		}
		w, ok := Overlap(a, b)
		if ok {
			if !a.Covers(w) || !b.Covers(w) {
				t.Fatalf("Overlap(%q, %q): witness %q not covered by both (%v, %v)", x, y, w, a.Covers(w), b.Covers(w))
			}
			if CheckPath(w) != nil {
				t.Fatalf("Overlap(%q, %q): witness %q is no path", x, y, w)
			}
			if !PrefixesMeet(a.Prefix(), b.Prefix()) {
				t.Fatalf("Overlap(%q, %q) covers %q, but their prefixes %q and %q do not meet", x, y, w, a.Prefix(), b.Prefix())
			}
			return
		}
		for _, p := range [][2]*Pattern{{a, b}, {b, a}} {
			sample, ok := Overlap(p[0], everything)
			if !ok || !p[0].Covers(sample) {
				t.Fatalf("%q: no path of its own (%q)", p[0].Text, sample)
			}
			if p[1].Covers(sample) {
				t.Fatalf("Overlap(%q, %q) = false, but both cover %q", x, y, sample)
			}
		}
		for _, p := range []*Pattern{a, b} {
			if strings.HasPrefix(p.Text, "/") && !strings.ContainsAny(p.Text, "!^{}") && !strings.Contains(p.Text, "**") && !strings.HasSuffix(p.Text, "/") {
				sample, _ := Overlap(p, everything)
				text := strings.TrimPrefix(p.Text, "/")
				plain, err := doublestar.Match(text, sample)
				if below, _ := doublestar.Match(text+"/**", sample); err == nil && !plain && !below {
					t.Fatalf("%q covers %q, which doublestar does not match with the pattern as written", p.Text, sample)
				}
			}
		}
	})
}

// TestPrefix: a pattern's prefix is the literal directory its paths lie
// in, and two patterns that overlap always have prefixes that meet.
func TestPrefix(t *testing.T) {
	for text, want := range map[string]string{
		"src/**":           "src",
		"src/app.py":       "src/app.py",
		"src":              "", // unanchored: any depth
		"/src":             "src",
		"/README.md":       "README.md",
		"*.md":             "",
		"**":               "",
		"src/*.go":         "src",
		"src/a/b/*":        "src/a/b",
		"{src,lib}/**":     "",
		"src/{a,b}/x.go":   "src",
		"src/a{1,2}/x.go":  "src",
		"docs/v1.2/":       "docs/v1.2",
		"src/**/x.go":      "src",
		"src/[ab]/x.go":    "src",
		"src\\*/x.go":      "src*/x.go",
		"a/b{/c,/d}/e.txt": "a/b",
	} {
		p, err := Parse(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if got := p.Prefix(); got != want {
			t.Errorf("Prefix(%s) = %q, want %q", text, got, want)
		}
	}
	corpus := []string{"src/**", "src/app.py", "src", "*.py", "src/a/*.py", "lib/**", "src/ab/**", "src/a", "docs/*.md", "{src,docs}/x",
		"src/a/b/c.go", "**/test/**", "/Makefile", "Makefile"}
	for _, x := range corpus {
		for _, y := range corpus {
			px, _ := Parse(x)
			py, _ := Parse(y)
			if _, ok := Overlap(px, py); ok && !PrefixesMeet(px.Prefix(), py.Prefix()) {
				t.Errorf("%s and %s overlap, but their prefixes %q and %q do not meet", x, y, px.Prefix(), py.Prefix())
			}
		}
	}
	if PrefixesMeet("src/a", "src/ab") || !PrefixesMeet("src", "src/ab") || !PrefixesMeet("", "x") {
		t.Error("PrefixesMeet is not segment-wise")
	}
}
