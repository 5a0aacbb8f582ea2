package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

func TestTailStart(t *testing.T) {
	for _, c := range []struct {
		content string
		n       int
		want    string // what is printed from the start offset
	}{
		{"", 3, ""},
		{"a\nb\nc\n", 0, ""},
		{"a\nb\nc\n", 1, "c\n"},
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc\n", 3, "a\nb\nc\n"},
		{"a\nb\nc\n", 9, "a\nb\nc\n"},
		{"a\nb\nc", 1, "c"}, // a last line not ended yet counts
		{"a\nb\nc", 2, "b\nc"},
		{"\n\nx\n", 2, "\nx\n"},
		{"long line one\nshort\n", 1, "short\n"},
	} {
		for _, chunk := range []int64{1, 2, 3, 64} {
			r := strings.NewReader(c.content)
			start, err := tailStart(r, int64(len(c.content)), c.n, chunk, nil)
			if err != nil || c.content[start:] != c.want {
				t.Errorf("%q, last %d, chunks of %d: from %d (%q), %v; want %q", c.content, c.n, chunk, start, c.content[start:], err, c.want)
			}
		}
	}
}

// TestTailStartFiltered: the last n lines that pass the filter, however
// many lines that do not lie between them and the end.
func TestTailStartFiltered(t *testing.T) {
	warn := func(line []byte) bool { return strings.HasPrefix(string(line), "W") }
	for _, c := range []struct {
		content string
		n       int
		want    string
	}{
		{"W1\ni\ni\nW2\ni\ni\ni\n", 1, "W2\ni\ni\ni\n"},
		{"W1\ni\ni\nW2\ni\ni\ni\n", 2, "W1\ni\ni\nW2\ni\ni\ni\n"},
		{"i\nW1\ni\ni\nW2\ni\n", 2, "W1\ni\ni\nW2\ni\n"},
		{"i\nW1\ni\nW2 not ended", 1, "W2 not ended"},
		{"i\nW1\ni\nW2 not ended", 2, "W1\ni\nW2 not ended"},
		{"i\ni\ni\n", 1, "i\ni\ni\n"}, // none passes: everything, for the printer to filter
		{"W a long warning line\n" + strings.Repeat("info\n", 40), 1, "W a long warning line\n" + strings.Repeat("info\n", 40)},
	} {
		for _, chunk := range []int64{1, 2, 3, 7, 64} {
			start, err := tailStart(strings.NewReader(c.content), int64(len(c.content)), c.n, chunk, warn)
			if err != nil || c.content[start:] != c.want {
				t.Errorf("%q, last %d warnings, chunks of %d: from %d (%q), %v; want %q", c.content, c.n, chunk, start, c.content[start:], err, c.want)
			}
		}
	}
}

func TestLogPrinter(t *testing.T) {
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	p := &logPrinter{out: w, min: levelRank("info")}
	in := `{"time":"2026-11-22T12:00:00.5Z","level":"INFO","msg":"daemon_started","pid":42,"sock":"/tmp/d.sock","note":"two words","meta":{"a":1},"empty":""}` + "\n" +
		`{"time":"2026-11-22T12:00:01Z","level":"DEBUG","msg":"batch committed","commands":3}` + "\n" +
		`goroutine 1 [running]:` + "\n" +
		`{"level":"WARN","msg":"no time"}` + "\n" +
		`{"time":"x","msg":"no level"}` + "\n" +
		`{"time":"2026-11-22T12:00:02Z","level":"ERROR","msg":"tail"`
	rest, err := p.lines([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	w.Flush()
	want := `2026-11-22T12:00:00.500Z INFO  daemon_started pid=42 sock=/tmp/d.sock note="two words" meta={"a":1} empty=""` + "\n" +
		`goroutine 1 [running]:` + "\n" +
		` WARN  no time` + "\n" +
		`{"time":"x","msg":"no level"}` + "\n"
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
	if string(rest) != `{"time":"2026-11-22T12:00:02Z","level":"ERROR","msg":"tail"` {
		t.Errorf("rest %q", rest)
	}
	out.Reset()
	p.raw = true
	p.min = levelRank("error")
	if _, err := p.lines(append(rest, "}\n"...)); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if out.String() != `{"time":"2026-11-22T12:00:02Z","level":"ERROR","msg":"tail"}`+"\n" {
		t.Errorf("raw: %q", out.String())
	}
}

// TestFollowLogRotation: -f prints lines as they are appended, a line
// only once it is ended, and goes on in the new file when the daemon
// rotates the old one — after the old one's last lines.
func TestFollowLogRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "daemon.log")
	appendTo := func(s string) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	appendTo("old-1\n")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sink, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	printed := func() string {
		b, err := os.ReadFile(sink.Name())
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	p := &logPrinter{out: bufio.NewWriter(sink)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- followLog(ctx, path, f, int64(len("old-1\n")), p, 5*time.Millisecond) }()
	waitOutput := func(want string) {
		t.Helper()
		if err := wait.Until(5*time.Second, "the followed lines printed", func() bool { return printed() == want }); err != nil {
			t.Fatalf("%v: printed %q, want %q", err, printed(), want)
		}
	}
	appendTo("old-2\nold-3 (not ended")
	waitOutput("old-2\n")
	appendTo(")\n")
	if err := os.Rename(path, path+".20261122T120000Z"); err != nil {
		t.Fatal(err)
	}
	appendTo("new-1\n")
	waitOutput("old-2\nold-3 (not ended)\nnew-1\n")
	appendTo("new-2\n")
	waitOutput("old-2\nold-3 (not ended)\nnew-1\nnew-2\n")
	// Truncated in place, as logrotate's copytruncate does: read from the
	// start. (Seen as a file shorter than what was read; one rewritten past
	// that before a look cannot be told from one that grew — tail -f's
	// limit too.)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	appendTo("x\n")
	waitOutput("old-2\nold-3 (not ended)\nnew-1\nnew-2\nx\n")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// FuzzLogLines: whatever daemon.log holds, the printer never fails on it,
// prints one line per newline and keeps exactly what follows the last one.
func FuzzLogLines(f *testing.F) {
	for _, seed := range []string{
		`{"time":"2026-11-22T12:00:00Z","level":"INFO","msg":"daemon_started","pid":1}` + "\n",
		`{"level":"ERROR","msg":"x","err":{"nested":[1,2]}}` + "\n" + `{"level":`,
		"panic: boom\n\ngoroutine 1 [running]:\n",
		`{"level":1,"msg":"not a record"}` + "\n",
		`{"time":"t","level":"WARN","msg":"a","msg":"b"} trailing` + "\n",
		`{"time":"t\n","level":"INFO","msg":"two\nlines","k":"c\rd","\u000akey":1}` + "\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		w := bufio.NewWriter(&out)
		p := &logPrinter{out: w}
		rest, err := p.lines(bytes.Clone(data))
		if err != nil {
			t.Fatal(err)
		}
		w.Flush()
		last := bytes.LastIndexByte(data, '\n')
		if want := data[last+1:]; !bytes.Equal(rest, want) {
			t.Fatalf("kept %q, want %q", rest, want)
		}
		if got, want := bytes.Count(out.Bytes(), []byte("\n")), bytes.Count(data, []byte("\n")); got != want {
			t.Fatalf("printed %d lines for %d", got, want)
		}
	})
}
