package journal

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// stream is a file standing for the journal's stream, and the value of
// JOURNAL_STREAM that names it.
func stream(t *testing.T) (*os.File, string) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return f, fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// TestPriorityPrefixes: on the journal's stream each record starts with
// its level's priority, records of derived handlers too; on any other
// stream (JOURNAL_STREAM inherited, naming another), plain JSON lines.
func TestPriorityPrefixes(t *testing.T) {
	f, id := stream(t)
	t.Setenv("JOURNAL_STREAM", id)
	log := slog.New(NewHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	log.Debug("batch committed")
	log.Info("daemon_started", "pid", 42)
	log.With("mesh", "local").Warn("broker_slow")
	log.WithGroup("conn").Error("daemon_fatal", "err", "disk full")
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	want := []string{`<7>{"time":`, `<6>{"time":`, `<4>{"time":`, `<3>{"time":`}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), b)
	}
	for i, line := range lines {
		if !strings.HasPrefix(line, want[i]) {
			t.Errorf("line %d = %q, want it to start %q", i, line, want[i])
		}
	}
	if !strings.Contains(lines[2], `"mesh":"local"`) || !strings.Contains(lines[3], `"conn":{"err":"disk full"}`) {
		t.Errorf("a derived handler's record lost its attributes:\n%s", b)
	}

	other, _ := stream(t)
	plain := slog.New(NewHandler(other, nil))
	plain.Warn("broker_slow")
	if b, _ := os.ReadFile(other.Name()); !strings.HasPrefix(string(b), `{"time":`) {
		t.Errorf("a stream JOURNAL_STREAM does not name got %q", b)
	}
}
