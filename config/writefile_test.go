package config

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestWriteFileAtomicMode: the file gets the mode asked for, a new one as
// well as one replaced, whatever mode it had; nothing else is left in
// the directory.
func TestWriteFileAtomicMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "local-token")
	for _, mode := range []os.FileMode{0o600, 0o644, 0o755, 0o600} {
		data := []byte("written with " + mode.String() + "\n")
		if err := WriteFileAtomic(path, data, mode); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Errorf("mode %v, want %v", fi.Mode(), mode)
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
			t.Errorf("content %q (%v), want %q", got, err, data)
		}
		assertOnly(t, dir, "local-token")
	}
}

// TestWriteFileAtomicFailureKeepsOld: a write that fails leaves path as
// it was and no temp file behind — failing before anything is written (a
// temp name the file system refuses) and failing at the rename itself
// (path is a directory).
func TestWriteFileAtomicFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("n", 250)) // its temp name passes the 255-byte limit
	if err := os.WriteFile(long, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(long, []byte("new"), 0o600); err == nil {
		t.Fatal("a temp name longer than the file system allows: no error")
	}
	if got, err := os.ReadFile(long); err != nil || string(got) != "old" {
		t.Errorf("after a failed write: %q (%v), want the old content", got, err)
	}
	assertOnly(t, dir, filepath.Base(long))

	taken := filepath.Join(dir, "http.port")
	if err := os.MkdirAll(filepath.Join(taken, "inside"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(taken, []byte("47823\n"), 0o644); err == nil {
		t.Fatal("renaming over a directory: no error")
	}
	if fi, err := os.Stat(filepath.Join(taken, "inside")); err != nil || !fi.IsDir() {
		t.Errorf("the directory in the way was changed: %v", err)
	}
	assertOnly(t, dir, filepath.Base(long), "http.port")
}

// TestWriteFileAtomicReadersSeeWholeFiles: while one file is replaced
// again and again, a reader always finds one whole version, never an
// empty or a partial file (which writing in place would show).
func TestWriteFileAtomicReadersSeeWholeFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	versions := [][]byte{bytes.Repeat([]byte("a"), 64<<10), bytes.Repeat([]byte("b"), 96<<10)}
	if err := WriteFileAtomic(path, versions[0], 0o600); err != nil {
		t.Fatal(err)
	}
	written := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 50 && err == nil; i++ {
			err = WriteFileAtomic(path, versions[(i+1)%2], 0o600)
		}
		written <- err
	}()
	for reads := 1; ; reads++ {
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, versions[0]) && !bytes.Equal(got, versions[1]) {
			t.Errorf("read %d: %d bytes that are neither version (%v)", reads, len(got), err)
			<-written
			return
		}
		select {
		case err := <-written:
			if err != nil {
				t.Fatal(err)
			}
			return
		default:
		}
	}
}

// assertOnly fails unless dir holds exactly names.
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(names)
	if !slices.Equal(got, names) {
		t.Errorf("directory holds %q, want %q", got, names)
	}
}
