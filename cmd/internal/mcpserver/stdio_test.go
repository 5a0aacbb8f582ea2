package mcpserver

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestPollable: a pipe in blocking mode, as a parent hands it over as
// stdin, is read through a non-blocking duplicate, so that a read waiting
// for data parks its goroutine (a deadline can end it, which only a
// pollable file allows) and data still arrives; a regular file is used as
// it is.
func TestPollable(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "writer")
	defer r.Close()
	defer w.Close()
	if r.SetReadDeadline(time.Now()) == nil {
		t.Fatal("the blocking pipe is pollable already: the test proves nothing")
	}
	p := pollable(r)
	if p == r {
		t.Fatal("a pipe was not duplicated")
	}
	defer p.Close()
	if err := p.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		t.Fatalf("the duplicate is not pollable: %v", err)
	}
	buf := make([]byte, 8)
	if _, err := p.Read(buf); !os.IsTimeout(err) {
		t.Fatalf("a read with nothing written: %v, want a timeout", err)
	}
	_ = p.SetReadDeadline(time.Time{})
	if _, err := w.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Read(buf); err != nil || string(buf[:n]) != "ping\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}

	f, err := os.Create(filepath.Join(t.TempDir(), "file"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if pollable(f) != f {
		t.Error("a regular file was duplicated")
	}
	if fl, err := fcntlFlags(f); err != nil || fl&syscall.O_NONBLOCK != 0 {
		t.Errorf("a regular file was made non-blocking (%#x, %v)", fl, err)
	}
}

func fcntlFlags(f *os.File) (int, error) {
	sc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var fl int
	var ferr error
	err = sc.Control(func(fd uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		fl = int(r)
		if e != 0 {
			ferr = e
		}
	})
	if err == nil {
		err = ferr
	}
	return fl, err
}
