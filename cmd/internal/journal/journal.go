// Package journal writes the log records of the long-running commands
// (the daemon and the broker, attached) the way systemd's journal reads
// a service's stderr: when JOURNAL_STREAM names the stream they go to,
// each record starts with its syslog priority, sd-daemon(3)'s "<N>"
// prefix, so that `journalctl -p warning` keeps the warnings and errors
// (without it every line is priority 6, info). Anywhere else the records
// are the plain JSON lines of slog's handler.
package journal

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
)

// NewHandler is slog's JSON handler writing to f, each record prefixed
// with its priority when f is the journal's stream (IsJournal).
func NewHandler(f *os.File, opts *slog.HandlerOptions) slog.Handler {
	if !IsJournal(f) {
		return slog.NewJSONHandler(f, opts)
	}
	w := &prefixWriter{w: f}
	return &handler{Handler: slog.NewJSONHandler(w, opts), w: w, mu: new(sync.Mutex)}
}

// IsJournal reports whether f is the stream JOURNAL_STREAM names
// ("<device>:<inode>", which systemd sets for a service whose stdout or
// stderr it connects to the journal): a process started from that
// service with its stderr elsewhere inherits the variable, not the
// stream.
func IsJournal(f *os.File) bool {
	want := os.Getenv("JOURNAL_STREAM")
	if want == "" {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && want == fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// Priority is the syslog priority of a record at level, as sd-daemon(3)
// prefixes a line with it: err, warning, info, debug.
func Priority(level slog.Level) string {
	switch {
	case level >= slog.LevelError:
		return "<3>"
	case level >= slog.LevelWarn:
		return "<4>"
	case level >= slog.LevelInfo:
		return "<6>"
	}
	return "<7>"
}

// handler sets the prefix of each record's one write, under a lock that
// the handlers derived from it (WithAttrs, WithGroup) share with it.
type handler struct {
	slog.Handler
	w  *prefixWriter
	mu *sync.Mutex
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.w.prefix = Priority(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &handler{Handler: h.Handler.WithAttrs(attrs), w: h.w, mu: h.mu}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{Handler: h.Handler.WithGroup(name), w: h.w, mu: h.mu}
}

// prefixWriter writes each record (slog's handler writes one at a time,
// in one Write) after the prefix of its level, in one write of its own.
type prefixWriter struct {
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(append(p.buf[:0], p.prefix...), b...)
	if _, err := p.w.Write(p.buf); err != nil {
		return 0, err
	}
	return len(b), nil
}
