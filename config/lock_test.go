package config

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLockSurvivesRemovedPidFile: with daemon.pid deleted (or moved) the
// directory is still locked, and the refusal names the holder's pid.
func TestLockSurvivesRemovedPidFile(t *testing.T) {
	p := testPaths(t)
	p.EnsureDaemonDir()
	l, err := p.LockPidFile()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if err := os.Rename(p.PidFile(), filepath.Join(p.DaemonDir, "moved")); err != nil {
		t.Fatal(err)
	}
	_, err = p.LockPidFile()
	if !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second lock with daemon.pid moved away: %v", err)
	}
	if want := "(pid " + strconv.Itoa(os.Getpid()) + ")"; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p.DaemonDir) {
		t.Errorf("refusal %q does not name the holder %s and the directory", err, want)
	}
	if _, err := os.Stat(p.PidFile()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused lock wrote daemon.pid: %v", err)
	}
}

// TestLockRemovesOnlyItsOwnFiles: Remove and Release remove a claimed file
// only while it is the one claimed, and act in the locked directory even
// after it was renamed.
func TestLockRemovesOnlyItsOwnFiles(t *testing.T) {
	p := testPaths(t)
	p.EnsureDaemonDir()
	l, err := p.LockPidFile()
	if err != nil {
		t.Fatal(err)
	}
	write := func(dir, name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(p.DaemonDir, "http.port", "1\n")
	write(p.DaemonDir, "daemon.sock", "")
	if err := l.Claim("http.port"); err != nil {
		t.Fatal(err)
	}
	if err := l.Claim("daemon.sock"); err != nil {
		t.Fatal(err)
	}
	// Someone replaces http.port: it is no longer ours to remove.
	if err := WriteFileAtomic(filepath.Join(p.DaemonDir, "http.port"), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := l.Remove("http.port"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(p.DaemonDir, "http.port")); err != nil || string(b) != "2\n" {
		t.Errorf("http.port after Remove of a replaced file: %q %v, want it left", b, err)
	}
	// The directory moves; a new one takes its path.
	moved := p.DaemonDir + "-moved"
	if err := os.Rename(p.DaemonDir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p.DaemonDir, 0o700); err != nil {
		t.Fatal(err)
	}
	write(p.DaemonDir, "daemon.sock", "")
	write(p.DaemonDir, "daemon.pid", "42\n")
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"daemon.sock", "daemon.pid"} {
		if _, err := os.Lstat(filepath.Join(p.DaemonDir, name)); err != nil {
			t.Errorf("the new directory's %s: %v, want it left", name, err)
		}
		if _, err := os.Lstat(filepath.Join(moved, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the moved directory's %s: %v, want it removed", name, err)
		}
	}
	l2, err := Paths{DaemonDir: moved}.LockPidFile()
	if err != nil {
		t.Fatalf("the lock outlived Release: %v", err)
	}
	l2.Release()
}
