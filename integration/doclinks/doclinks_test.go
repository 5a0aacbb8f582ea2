// Package doclinks checks the repository's Markdown: every relative link
// and image names a file or directory that exists, and every #anchor a
// heading of the file it points into. It reads files only — no server, no
// build — so that `go test ./...` (and .ci/run) runs it in a moment.
package doclinks

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestMarkdownLinksResolve walks every *.md of the repository and fails,
// naming file:line and target, on a link that leads nowhere.
func TestMarkdownLinksResolve(t *testing.T) {
	root := repoRoot(t)
	files := markdownFiles(t, root)
	if len(files) == 0 {
		t.Fatal("no Markdown file found under " + root)
	}
	anchors := map[string][]string{} // file (slash path from root) → its heading slugs
	for _, f := range files {
		for _, l := range readLinks(t, root, f) {
			if err := resolve(root, f, l.target, anchors); err != nil {
				t.Errorf("%s:%d: [%s](%s): %v", f, l.line, l.text, l.target, err)
			}
		}
	}
}

// link is one [text](target) of a file, at its line.
type link struct {
	line         int
	text, target string
}

// linkPattern matches an inline link or image; its text may hold one level
// of brackets, and a title may follow the target.
var linkPattern = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// codeSpan matches inline code, whose brackets are not links.
var codeSpan = regexp.MustCompile("`+[^`]*`+")

// linksIn returns the links of a Markdown text, outside fenced code blocks
// and inline code.
func linksIn(text string) []link {
	var out []link
	fenced := false
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if trimmed := strings.TrimSpace(line); strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkPattern.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			out = append(out, link{line: n, text: m[1], target: m[2]})
		}
	}
	return out
}

// resolve checks one target of file f (a slash path from root). Links to
// other sites and mail addresses are not followed.
func resolve(root, f, target string, anchors map[string][]string) error {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return nil
	}
	file, anchor, _ := strings.Cut(target, "#")
	dest := f
	if file != "" {
		if strings.HasPrefix(file, "/") {
			dest = path.Clean(strings.TrimPrefix(file, "/"))
		} else {
			dest = path.Join(path.Dir(f), file)
		}
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return fmt.Errorf("%s is outside the repository", dest)
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
			return fmt.Errorf("%s does not exist", dest)
		}
	}
	if anchor == "" || !strings.HasSuffix(dest, ".md") {
		return nil
	}
	slugs, ok := anchors[dest]
	if !ok {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(dest)))
		if err != nil {
			return err
		}
		slugs = headingSlugs(string(data))
		anchors[dest] = slugs
	}
	if !slices.Contains(slugs, anchor) {
		return fmt.Errorf("%s has no heading #%s", dest, anchor)
	}
	return nil
}

// headingSlugs are the anchors GitHub gives a file's ATX headings (# …),
// outside fenced code blocks; a repeated slug gets -1, -2, ….
func headingSlugs(text string) []string {
	var out []string
	seen := map[string]int{}
	fenced := false
	for line := range strings.Lines(text) {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fenced = !fenced
			continue
		}
		level := len(trimmed) - len(strings.TrimLeft(trimmed, "#"))
		if fenced || level == 0 || level > 6 || !strings.HasPrefix(trimmed[level:], " ") {
			continue
		}
		s := slug(trimmed[level:])
		if n := seen[s]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", s, n))
		} else {
			out = append(out, s)
		}
		seen[s]++
	}
	return out
}

// slug is GitHub's anchor for a heading's text: lower case, letters,
// digits, '-' and '_' kept, spaces made '-', everything else dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// repoRoot is the directory holding go.mod, above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// markdownFiles are the *.md files below root as slash paths, leaving out
// hidden directories (.git) and testdata, whose files are fixtures.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readLinks reads file f (a slash path from root) and returns its links.
func readLinks(t *testing.T, root, f string) []link {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
	if err != nil {
		t.Fatal(err)
	}
	return linksIn(string(data))
}

// TestLinkChecker holds the checker to what it must see and pass over: a
// link it missed would never fail TestMarkdownLinksResolve.
func TestLinkChecker(t *testing.T) {
	text := "# Top\n\nSee [the API](docs/API.md#routes) and ![a picture](img/x.png \"title\").\n" +
		"`[not](a-link.md)` in code, and [a [nested] text](other.md).\n" +
		"```sh\n[inside](a-fence.md)\n```\n## Top\n### `GET /v1/send`, again!\n"
	got := linksIn(text)
	want := []link{{3, "the API", "docs/API.md#routes"}, {3, "a picture", "img/x.png"}, {4, "a [nested] text", "other.md"}}
	if !slices.Equal(got, want) {
		t.Errorf("linksIn = %+v, want %+v", got, want)
	}
	if got, want := headingSlugs(text), []string{"top", "top-1", "get-v1send-again"}; !slices.Equal(got, want) {
		t.Errorf("headingSlugs = %q, want %q", got, want)
	}

	root := t.TempDir()
	for name, body := range map[string]string{"README.md": "x", "docs/A.md": "# Where to change what\n", "docs/img/p.png": ""} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		from, target string
		ok           bool
	}{
		{"README.md", "docs/A.md", true},
		{"README.md", "docs/A.md#where-to-change-what", true},
		{"README.md", "docs/A.md#nowhere", false},
		{"README.md", "docs/B.md", false},
		{"docs/A.md", "img/p.png", true},
		{"docs/A.md", "../README.md", true},
		{"docs/A.md", "../../outside.md", false},
		{"docs/A.md", "#where-to-change-what", true},
		{"docs/A.md", "/docs/img", true},
		{"docs/A.md", "https://example.com/missing.md", true},
	} {
		if err := resolve(root, c.from, c.target, map[string][]string{}); (err == nil) != c.ok {
			t.Errorf("resolve(%s, %s) = %v, want ok %v", c.from, c.target, err, c.ok)
		}
	}
}
