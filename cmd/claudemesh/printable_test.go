package main

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/claudemesh/claudemesh-go/messages"
)

func TestPrintable(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text, 42 < 43 & \\x1b stays", "plain text, 42 < 43 & \\x1b stays"},
		{"\x1b]0;pwned\x07\x1b[2J…\r", `\x1b]0;pwned\x07\x1b[2J…\r`},
		{"line one\nline two\ttab", `line one\nline two\ttab`},
		{"\x00\x08\x7f", `\x00\x08\x7f`},
		{"\u009b31m C1 CSI, \u0085 NEL", `\u009b31m C1 CSI, \u0085 NEL`},
		{"\xff\xfe bytes, \xe2\x80 cut", `\xff\xfe bytes, \xe2\x80 cut`},
		{"admin\u202egnp.exe", `admin\u202egnp.exe`},
		{"\u202a\u202b\u202c\u202d \u2066\u2067\u2068\u2069", `\u202a\u202b\u202c\u202d \u2066\u2067\u2068\u2069`},
		{"ali\u200bce \u200e\u200f \ufeff \u00ad", `ali\u200bce \u200e\u200f \ufeff \u00ad`},
		{"tag \U000E0041 and \u2028\u2029", `tag \U000e0041 and \u2028\u2029`},
		{"émoji 🚀 ünïcödé 日本", "émoji 🚀 ünïcödé 日本"},
	} {
		if got := printable(c.in); got != c.want {
			t.Errorf("printable(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := printableKeepTabs("\tat main.go:1\x1b"); got != "\tat main.go:1\\x1b" {
		t.Errorf("printableKeepTabs: %q", got)
	}
}

// FuzzPrintable: whatever the text, what printable makes of it is valid
// UTF-8 with no control character, no format character (bidi controls
// among them) and no line or paragraph separator.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"", "a\x1b[2J", "\u202e", "\xc2\x9b", "\xed\xa0\x80", "\U000e0001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := printable(s)
		if !utf8.ValidString(out) {
			t.Fatalf("printable(%q) = %q: not UTF-8", s, out)
		}
		for _, r := range out {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
				t.Fatalf("printable(%q) = %q keeps %U", s, out, r)
			}
		}
	})
}

func TestInboxLine(t *testing.T) {
	body := "\x1b]0;pwned\x07\x1b[2J…\r"
	for _, c := range []struct {
		it   messages.InboxItem
		want string
	}{
		{messages.InboxItem{Mesh: "local", Kind: messages.KindDM, SenderName: "evil\u202e", Body: &body, ReceivedAt: "2026-11-22T12:00:00Z"},
			`2026-11-22T12:00:00.000Z  local  dm  evil\u202e: \x1b]0;pwned\x07\x1b[2J…\r`},
		{messages.InboxItem{Mesh: "local", Kind: "topic", Topic: "*", SenderPubkey: strings.Repeat("ab", 32), ReceivedAt: "2026-11-22T12:00:00.5Z"},
			"2026-11-22T12:00:00.500Z  local  *  abababababab…: (could not be decrypted)"},
		{messages.InboxItem{Mesh: "m", Kind: "topic", Topic: "@ops", SenderName: "a", Body: &body, ReceivedAt: "2026-11-22T12:00:00.123456Z"},
			`2026-11-22T12:00:00.123Z  m  @ops  a: \x1b]0;pwned\x07\x1b[2J…\r`},
		{messages.InboxItem{Mesh: "m", Kind: "topic", Topic: "builds", SenderName: "a", Body: &body, ReceivedAt: "2026-11-22T13:00:00.1+01:00"},
			`2026-11-22T12:00:00.100Z  m  #builds  a: \x1b]0;pwned\x07\x1b[2J…\r`},
	} {
		if got := inboxLine(&c.it); got != c.want {
			t.Errorf("line %q\nwant %q", got, c.want)
		}
	}
}

// TestInboxEntry: a mail header shows beside the line — the subject
// printable, an importance above normal, and the acknowledgement asked for
// with the command that gives it (a held contact request's: once it is
// accepted), or given.
func TestInboxEntry(t *testing.T) {
	body, acked := "review PR 12", "2026-11-22T12:01:00Z"
	base := messages.InboxItem{ID: "01INBOXID", Mesh: "local", Kind: messages.KindDM, SenderName: "alice", Body: &body,
		ReceivedAt: "2026-11-22T12:00:00Z"}
	line := "2026-11-22T12:00:00.000Z  local  dm  alice: review PR 12"
	mail := base
	mail.Subject, mail.Importance, mail.AckRequired = "review\x1b[2J", messages.ImportanceUrgent, true
	done := mail
	done.AckedAt = &acked
	normal := base
	normal.Importance = messages.ImportanceNormal
	held := mail
	held.HeldUntil = &acked
	for _, c := range []struct {
		it   messages.InboxItem
		want string
	}{
		{base, line},
		{normal, line},
		{mail, line + `  [review\x1b[2J]  (urgent)  asks for an acknowledgement: claudemesh inbox ack 01INBOXID`},
		{done, line + `  [review\x1b[2J]  (urgent)  acknowledged`},
		{held, line + `  [review\x1b[2J]  (urgent)  asks for an acknowledgement, once you accept the request`},
	} {
		if got := inboxEntry(&c.it); got != c.want {
			t.Errorf("entry %q\nwant  %q", got, c.want)
		}
	}
}

func TestLogPrinterEscapes(t *testing.T) {
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	p := &logPrinter{out: w, min: levelRank("debug")}
	in := `{"time":"2026-11-22T12:00:00Z","level":"WARN","msg":"peer \u202eevil","err":"broker said \u001b[2J","retry_in":"533ms"}` + "\n" +
		"panic: \x1b]0;pwned\x07\n" +
		"\tat main.go:12\n"
	if _, err := p.lines([]byte(in)); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	want := `2026-11-22T12:00:00.000Z WARN  peer \u202eevil err="broker said \u001b[2J" retry_in=533ms` + "\n" +
		`panic: \x1b]0;pwned\x07` + "\n" +
		"\tat main.go:12\n"
	if out.String() != want {
		t.Errorf("printed:\n%q\nwant:\n%q", out.String(), want)
	}
}

func TestShortCutsAtACharacter(t *testing.T) {
	if got := short("ééé", 3); got != "é…" {
		t.Errorf("short: %q", got)
	}
	if got := short("abc", 3); got != "abc" {
		t.Errorf("short: %q", got)
	}
}

// TestPrintableLines: an error of several lines keeps them; any other
// control in it is escaped.
func TestPrintableLines(t *testing.T) {
	got := printableLines("start failed\nbroker said: \x1b]0;pwned\x07\r")
	if want := "start failed\nbroker said: \\x1b]0;pwned\\x07\\r"; got != want {
		t.Fatalf("printableLines: %q, want %q", got, want)
	}
	got = printableText("steps:\n\tmake \x1b[2Jrelease\u202e\n")
	if want := "steps:\n\tmake \\x1b[2Jrelease\\u202e\n"; got != want {
		t.Fatalf("printableText: %q, want %q", got, want)
	}
}

func TestStamp(t *testing.T) {
	for in, want := range map[string]string{
		"2026-12-08T00:19:22.52Z":            "2026-12-08T00:19:22.520Z",
		"2026-12-08T00:19:13.017Z":           "2026-12-08T00:19:13.017Z",
		"2026-12-08T00:19:13Z":               "2026-12-08T00:19:13.000Z",
		"2026-12-08T01:44:59.570765706Z":     "2026-12-08T01:44:59.570Z",
		"2026-12-08T02:19:13.017+02:00":      "2026-12-08T00:19:13.017Z",
		"":                                   "",
		"soon\x1b[2J":                        `soon\x1b[2J`,
		"2026-12-08 00:19:13 (not RFC 3339)": "2026-12-08 00:19:13 (not RFC 3339)",
	} {
		if got := stamp(in); got != want {
			t.Errorf("stamp(%q) = %q, want %q", in, got, want)
		}
	}
}
