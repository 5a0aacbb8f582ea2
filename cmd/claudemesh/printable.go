package main

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// printable is s made safe to print on a terminal: every character that
// could act on the terminal or hide what the text says is written as an
// escape instead — newline, carriage return and tab as \n, \r and \t (a
// message printed is one line: a body cannot forge another message's line
// or a table's column), the other C0 controls, DEL and invalid UTF-8 bytes
// as \xHH; C1 controls, the bidi embeddings, overrides and isolates
// (U+202A–U+202E, U+2066–U+2069) and every other invisible format
// character (Unicode category Cf: zero-width spaces and joiners, marks,
// tags), and the line and paragraph separators as \uHHHH (\UHHHHHHHH past
// U+FFFF). Everything else, a backslash included, is left as it is: the
// result is for reading, not for parsing back (--json is exact).
//
// Every human-readable output that shows text from the mesh — a peer's
// name, profile or message, an error the broker sent, a log line — goes
// through printable.
func printable(s string) string { return escapeControls(s, false) }

// printableKeepTabs is printable but leaves tabs as they are: for log
// lines, where a panic's trace indents with them and no column depends on
// them.
func printableKeepTabs(s string) string { return escapeControls(s, true) }

func escapeControls(s string, keepTabs bool) string {
	i := 0
	for i < len(s) && (s[i] >= 0x20 && s[i] < 0x7f || keepTabs && s[i] == '\t') {
		i++
	}
	if i == len(s) {
		return s // printable ASCII: the common case
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\t' && keepTabs:
			b.WriteByte('\t')
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == utf8.RuneError && size == 1, r < 0x20, r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case hidden(r) && r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		case hidden(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// hidden reports a character beyond ASCII that a terminal may act on or
// that shows nothing of itself: the C1 controls, format characters (Cf,
// the bidi controls among them) and the line and paragraph separators.
func hidden(r rune) bool {
	return r >= 0x80 && r <= 0x9f || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// row is a table line of printable fields, separated by tabs (printList's
// and tabwriter's columns).
func row(fields ...string) string {
	for i, f := range fields {
		fields[i] = printable(f)
	}
	return strings.Join(fields, "\t")
}

// printableLines is printable line by line: the newlines of a message of
// several lines (ours) stay, every other control is escaped.
func printableLines(s string) string { return eachLine(s, printable) }

// printableText is printableLines keeping tabs too: for a text meant to
// be read as it was written, such as a skill's instructions, whose code
// blocks indent with tabs.
func printableText(s string) string { return eachLine(s, printableKeepTabs) }

func eachLine(s string, escape func(string) string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = escape(l)
	}
	return strings.Join(lines, "\n")
}

// stampLayout is how every human-readable output prints a moment: RFC 3339
// in UTC to the millisecond, one width everywhere (the daemon's and the
// broker's RFC 3339 drops trailing zeros, or carries nanoseconds).
const stampLayout = "2006-01-02T15:04:05.000Z"

// stamp is the RFC 3339 time s in stampLayout; s printable as it is when
// it is not one ("" stays "").
func stamp(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return printable(s)
	}
	return stampTime(t)
}

// stampTime is t in stampLayout.
func stampTime(t time.Time) string { return t.UTC().Format(stampLayout) }
