package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/claudemesh/claudemesh-go/config"
)

type daemonLogsCmd struct {
	Lines  int    `short:"n" default:"100" help:"Print the last N lines of daemon.log (0: none, then follow)."`
	Follow bool   `short:"f" help:"Then keep printing lines as the daemon writes them, across rotations, until interrupted."`
	Level  string `default:"debug" enum:"debug,info,warn,error" help:"Only records at this level or above (lines that are not JSON records are always shown)."`
	JSON   bool   `name:"json" help:"Print the records as the daemon wrote them, one JSON object per line."`
}

// followEvery is how often -f looks for new lines: the log is a file, and
// a second reader of it has nothing to wait on.
const followEvery = 250 * time.Millisecond

// Run prints daemon.log, which a detached daemon writes (one slog JSON
// record per line; a panic's trace as plain lines); a --foreground daemon
// logs to its stderr instead. Rotated files (daemon.log.<UTC time>) are
// not read.
func (c *daemonLogsCmd) Run() error {
	if c.Lines < 0 {
		return usageErr("-n must not be negative")
	}
	paths, err := config.ResolvePaths()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	f, err := os.Open(paths.LogFile())
	if errors.Is(err, fs.ErrNotExist) {
		return &exitError{code: 1, err: fmt.Errorf("no %s: a detached daemon writes it (a --foreground one logs to its stderr)", paths.LogFile())}
	}
	if err != nil {
		return err
	}
	defer func() { f.Close() }()
	out := bufio.NewWriter(os.Stdout)
	p := &logPrinter{out: out, min: levelRank(c.Level), raw: c.JSON}
	offset, partial, err := printTail(f, c.Lines, p)
	if err == nil && !c.Follow && len(partial) > 0 {
		err = p.line(partial) // a last line the daemon has not ended yet
	}
	if err != nil || !c.Follow {
		if ferr := out.Flush(); err == nil {
			err = ferr
		}
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return followLog(ctx, paths.LogFile(), f, offset, p, followEvery)
}

// printTail prints the last n complete lines of f that p shows (the lines
// at --level or above: filtered, then taken) and returns the offset after
// them and what follows (a line not ended yet).
func printTail(f *os.File, n int, p *logPrinter) (int64, []byte, error) {
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, nil, err
	}
	var keep func([]byte) bool
	if p.min > levelRank("debug") {
		keep = p.shows
	}
	start, err := tailStart(f, end, n, 64<<10, keep)
	if err != nil {
		return 0, nil, err
	}
	data := make([]byte, end-start)
	if _, err := f.ReadAt(data, start); err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, err
	}
	rest, err := p.lines(data)
	return end - int64(len(rest)), rest, err
}

// tailStart is the offset of the first of the last n complete lines of
// the first end bytes of r that keep reports true for (any line, for a nil
// keep), read backwards in chunks of chunk bytes (a last line without its
// newline yet counts as one); 0 when there are fewer.
func tailStart(r io.ReaderAt, end int64, n int, chunk int64, keep func([]byte) bool) (int64, error) {
	if n == 0 {
		return end, nil
	}
	buf := make([]byte, chunk)
	var after []byte // with keep: the line being read backwards, its bytes of the chunks read so far
	seen := 0
	pos := end
	for pos > 0 {
		size := min(chunk, pos)
		pos -= size
		if _, err := r.ReadAt(buf[:size], pos); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		lineEnd := size // the line before buf[lineEnd] (a newline, or the chunk's end)
		for i := size - 1; i >= 0; i-- {
			if buf[i] != '\n' || pos+i == end-1 {
				continue // the newline ending the file ends the last line
			}
			if keep != nil {
				line := append(buf[i+1:lineEnd:lineEnd], after...)
				after, lineEnd = after[:0], i
				if !keep(bytes.TrimSuffix(line, []byte("\n"))) {
					continue
				}
			}
			if seen++; seen == n {
				return pos + i + 1, nil
			}
		}
		if keep != nil {
			after = append(append([]byte(nil), buf[:lineEnd]...), after...)
		}
	}
	return 0, nil
}

// followLog prints what is appended to path's file f from offset on, and
// when the daemon rotates it, the old file's last lines and then the new
// file's, until ctx ends.
func followLog(ctx context.Context, path string, f *os.File, offset int64, p *logPrinter, every time.Duration) error {
	cur := f
	defer func() {
		if cur != f {
			cur.Close()
		}
	}()
	var partial []byte
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		next, rotatedNow := rotated(path, cur) // looked at before the read: the old file gets no write after its rename
		if st, err := cur.Stat(); err == nil && st.Size() < offset {
			offset, partial = 0, nil // truncated in place (not how the daemon rotates, but logrotate's copytruncate does)
		}
		data, err := io.ReadAll(io.NewSectionReader(cur, offset, math.MaxInt64-offset))
		if err != nil {
			return err
		}
		offset += int64(len(data))
		if partial, err = p.lines(append(partial, data...)); err != nil {
			return err
		}
		if err := p.out.Flush(); err != nil {
			return err
		}
		if rotatedNow {
			if cur != f {
				cur.Close()
			}
			cur, offset, partial = next, 0, nil
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// rotated opens path when it is no longer the file f (the daemon renamed
// f and started a new one).
func rotated(path string, f *os.File) (*os.File, bool) {
	cur, err := os.Stat(path)
	if err != nil {
		return nil, false // between the rename and the new file
	}
	held, err := f.Stat()
	if err != nil || os.SameFile(cur, held) {
		return nil, false
	}
	next, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	return next, true
}

// logPrinter prints log lines: JSON records as "time LEVEL msg key=value"
// (the time in stampLayout), or as written with raw, filtered by level;
// other lines as they are.
type logPrinter struct {
	out *bufio.Writer
	min int
	raw bool
}

// shows reports whether line would be printed: a record at the level
// or above, or a line that is not a record.
func (p *logPrinter) shows(line []byte) bool {
	rec, ok := parseRecord(line)
	return !ok || levelRank(rec.level) >= p.min
}

// lines prints every complete line of data and returns the bytes after
// the last newline.
func (p *logPrinter) lines(data []byte) ([]byte, error) {
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return data, nil
		}
		if err := p.line(data[:i]); err != nil {
			return nil, err
		}
		data = data[i+1:]
	}
}

// line prints one line of the log: a record rendered, or as written with
// raw (exact, like every --json); a line that is not a record as it is.
// What is rendered, or not a record, is printable (a log line may quote
// what a peer or a broker sent), tabs kept.
func (p *logPrinter) line(line []byte) error {
	rec, ok := parseRecord(line)
	switch {
	case !ok:
		_, err := fmt.Fprintf(p.out, "%s\n", printableKeepTabs(string(line)))
		return err
	case levelRank(rec.level) < p.min:
		return nil
	case p.raw:
		_, err := fmt.Fprintf(p.out, "%s\n", line)
		return err
	}
	_, err := fmt.Fprintf(p.out, "%s\n", printableKeepTabs(fmt.Sprintf("%s %-5s %s%s", stamp(rec.time), rec.level, rec.msg, rec.attrs)))
	return err
}

// record is one slog JSON record: its time, level and message, and its
// other attributes rendered " key=value" in the order written.
type record struct {
	time, level, msg, attrs string
}

func parseRecord(line []byte) (record, bool) {
	var rec record
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return rec, false
	}
	var attrs strings.Builder
	for dec.More() {
		k, err := dec.Token()
		key, ok := k.(string)
		if err != nil || !ok {
			return rec, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return rec, false
		}
		if strings.ContainsFunc(key, unicode.IsControl) {
			key = strconv.Quote(key)
		}
		var s string
		isString := json.Unmarshal(v, &s) == nil
		if isString && strings.ContainsFunc(s, unicode.IsControl) {
			s, isString = string(v), key != "level" // shown escaped, as written
		}
		switch {
		case key == "time" && isString:
			rec.time = s
		case key == "level" && isString:
			rec.level = s
		case key == "msg" && isString:
			rec.msg = s
		case isString && s != "" && !strings.ContainsAny(s, " \"="):
			fmt.Fprintf(&attrs, " %s=%s", key, s)
		default:
			fmt.Fprintf(&attrs, " %s=%s", key, v)
		}
	}
	if _, err := dec.Token(); err != nil || rec.level == "" || dec.More() {
		return rec, false
	}
	rec.attrs = attrs.String()
	return rec, true
}

// levelRank orders slog's level names (an unknown one ranks with INFO).
func levelRank(level string) int {
	switch strings.ToUpper(level) {
	case "DEBUG":
		return 0
	case "WARN":
		return 2
	case "ERROR":
		return 3
	}
	return 1
}
