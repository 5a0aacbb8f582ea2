package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ErrAlreadyRunning means another process holds the daemon's pid lock.
var ErrAlreadyRunning = errors.New("daemon already running")

// PidLock is the exclusive flock on daemon.pid that makes the daemon a
// single instance. It is taken before the socket or the databases are
// touched; a pid file left by a killed daemon holds no lock and never blocks
// a start.
type PidLock struct {
	f    *os.File
	path string
}

// LockPidFile takes the lock and writes our pid into the file.
func (p Paths) LockPidFile() (*PidLock, error) {
	path := p.PidFile()
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open pid file: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w (pid %s)", ErrAlreadyRunning, readPid(path))
			}
			return nil, fmt.Errorf("lock pid file: %w", err)
		}
		// A daemon that was exiting may have removed the file between our
		// open and our lock; then the lock is on an orphan inode: retry.
		if same, err := sameFile(f, path); err != nil || !same {
			f.Close()
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
			continue
		}
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, fmt.Errorf("write pid file: %w", err)
		}
		if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
			f.Close()
			return nil, fmt.Errorf("write pid file: %w", err)
		}
		return &PidLock{f: f, path: path}, nil
	}
}

// Release removes the pid file and drops the lock.
func (l *PidLock) Release() error {
	err := os.Remove(l.path)
	return errors.Join(err, l.f.Close())
}

func sameFile(f *os.File, path string) (bool, error) {
	a, err := f.Stat()
	if err != nil {
		return false, err
	}
	b, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	return os.SameFile(a, b), nil
}

func readPid(path string) string {
	b, err := os.ReadFile(path)
	if pid := strings.TrimSpace(string(b)); err == nil && pid != "" {
		return pid
	}
	return "unknown"
}
