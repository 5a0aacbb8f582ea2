package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// LogFile is daemon.log for a detached daemon, rotated by size: a write that
// would take it past the size limit first renames it to
// daemon.log.<UTC time> and starts a new one. Rotated files older than the
// age limit are deleted at each rotation and at open. Each slog record is
// one Write, so records never straddle two files.
//
// The detached process's stderr is the daemon.log it started with; after a
// rotation a Go panic lands in the rotated file, which is kept.
//
// It is ours rather than gopkg.in/natefinch/lumberjack.v2 because
// lumberjack would change what users see: it refuses (drops) a record
// larger than the size limit where we start a file for it, names rotated
// files daemon-<time>.log instead of daemon.log.<time>, and its limits are
// plain fields that a config reload cannot change while the daemon writes
// (SetLimits can). It would save some eighty lines and add a goroutine for
// its pruning; the behaviour above is pinned by logfile_test.go.
type LogFile struct {
	mu      sync.Mutex
	path    string
	f       *os.File
	size    int64
	maxSize int64
	maxAge  time.Duration
}

// OpenLogFile opens (appends to) path with the given limits.
func OpenLogFile(path string, maxSizeMB, maxAgeDays int) (*LogFile, error) {
	l := &LogFile{path: path}
	l.SetLimits(maxSizeMB, maxAgeDays)
	if err := l.open(); err != nil {
		return nil, err
	}
	l.prune()
	return l, nil
}

// SetLimits changes the rotation limits (config reload).
func (l *LogFile) SetLimits(maxSizeMB, maxAgeDays int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maxSize = int64(maxSizeMB) << 20
	l.maxAge = time.Duration(maxAgeDays) * 24 * time.Hour
}

func (l *LogFile) open() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("open log: %w", err)
	}
	l.f, l.size = f, fi.Size()
	return nil
}

// Write appends p, rotating first if p would pass the size limit.
func (l *LogFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size > 0 && l.size+int64(len(p)) > l.maxSize {
		if err := l.rotate(); err != nil {
			fmt.Fprintln(os.Stderr, "claudemesh: log rotation failed:", err) // keep writing to the old file
		}
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return n, err
}

func (l *LogFile) rotate() error {
	rotated := l.path + "." + time.Now().UTC().Format("20060102T150405.000000000")
	if err := os.Rename(l.path, rotated); err != nil {
		return err
	}
	old := l.f
	if err := l.open(); err != nil {
		l.f = old
		return err
	}
	old.Close()
	l.prune()
	return nil
}

// prune deletes rotated logs older than the age limit.
func (l *LogFile) prune() {
	matches, _ := filepath.Glob(l.path + ".*")
	for _, m := range matches {
		if strings.HasSuffix(m, ".tmp") {
			continue
		}
		if fi, err := os.Stat(m); err == nil && time.Since(fi.ModTime()) > l.maxAge {
			os.Remove(m)
		}
	}
}

// Close closes the current file.
func (l *LogFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}
