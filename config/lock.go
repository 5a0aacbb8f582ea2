package config

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ErrAlreadyRunning means another daemon holds the daemon directory's lock.
var ErrAlreadyRunning = errors.New("daemon already running")

// PidLock makes the daemon a single instance: an exclusive flock on the
// daemon directory itself, taken before anything in it is touched and held
// for the daemon's life. daemon.pid is written under it but locks nothing.
//
// Why the directory and not a file in it: every file two daemons must never
// share (outbox.db, inbox.db and their WAL files, the socket, http.port) is
// reached by a name in that directory. A lock on a file inside it (daemon.pid
// once) is defeated by deleting or moving that file: the holder keeps its
// lock on the old inode and the next daemon creates and locks a new one. A
// lock file next to the databases has the same flaw. The directory's inode
// cannot be swapped from under its entries: whoever opens these databases by
// their path goes through this inode and meets the lock; renaming the
// directory takes the databases with it, so a daemon started at the old path
// gets a new, empty directory and shares no file. (Moving one database out
// of the directory while its daemon writes to it is beyond what a lock can
// stop; so is kill -9.) A killed daemon's lock goes with its process, so a
// stale daemon.pid never blocks a start.
//
// The lock also records the files this daemon created there (Claim), and
// removes them (Remove, Release) through the directory's own descriptor and
// only while they are still the files it created: a daemon whose directory
// was moved away never deletes the socket or http.port of a daemon started
// at the old path.
type PidLock struct {
	root *os.Root // the daemon directory, opened once
	dir  *os.File // the same directory, flocked
	mu   sync.Mutex
	own  map[string]os.FileInfo // name → the file this daemon created
}

// LockPidFile takes the daemon directory's lock and writes our pid into
// daemon.pid. Another daemon holding it is ErrAlreadyRunning, naming its pid.
func (p Paths) LockPidFile() (*PidLock, error) {
	root, err := os.OpenRoot(p.DaemonDir)
	if err != nil {
		return nil, fmt.Errorf("open daemon directory: %w", err)
	}
	dir, err := root.Open(".")
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("open daemon directory: %w", err)
	}
	if err := syscall.Flock(int(dir.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := lockHolder(dir, root)
		dir.Close()
		root.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (pid %s) in %s; stop it with `claudemesh daemon down`", ErrAlreadyRunning, holder, p.DaemonDir)
		}
		return nil, fmt.Errorf("lock daemon directory %s: %w", p.DaemonDir, err)
	}
	l := &PidLock{root: root, dir: dir, own: map[string]os.FileInfo{}}
	if err := l.writePid(); err != nil {
		return nil, errors.Join(err, l.Release())
	}
	return l, nil
}

// writePid replaces daemon.pid (a killed daemon's may be there) with ours.
func (l *PidLock) writePid() error {
	name := pidFileName
	f, err := l.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	_, err = f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
	if err = errors.Join(err, f.Close()); err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	return l.Claim(name)
}

const pidFileName = "daemon.pid"

// Claim records the file now at name (in the daemon directory) as created
// by this daemon, for Remove and Release to remove.
func (l *PidLock) Claim(name string) error {
	fi, err := l.root.Lstat(name)
	if err != nil {
		return fmt.Errorf("claim %s: %w", name, err)
	}
	l.mu.Lock()
	l.own[name] = fi
	l.mu.Unlock()
	return nil
}

// Remove removes name from the daemon directory if it is still the file
// this daemon claimed; a file it did not create is left alone.
func (l *PidLock) Remove(name string) error {
	l.mu.Lock()
	mine, ok := l.own[name]
	delete(l.own, name)
	l.mu.Unlock()
	if !ok {
		return nil
	}
	now, err := l.root.Lstat(name)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !os.SameFile(mine, now):
		return nil
	}
	if err := l.root.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// RemoveStale removes name from the daemon directory whoever created it:
// under the lock, a file there can only be a dead daemon's.
func (l *PidLock) RemoveStale(name string) error {
	if err := l.root.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Release removes the files this daemon claimed (daemon.pid among them)
// and drops the lock.
func (l *PidLock) Release() error {
	l.mu.Lock()
	names := make([]string, 0, len(l.own))
	for name := range l.own {
		names = append(names, name)
	}
	l.mu.Unlock()
	var errs []error
	for _, name := range names {
		errs = append(errs, l.Remove(name))
	}
	errs = append(errs, l.dir.Close(), l.root.Close()) // closing the last descriptor drops the flock
	return errors.Join(errs...)
}

// lockHolder names the pid holding the lock on dir: the kernel's word for it
// where /proc/locks says (Linux), else daemon.pid's content.
func lockHolder(dir *os.File, root *os.Root) string {
	if pid := flockHolder(dir); pid != "" {
		return pid
	}
	b, err := root.ReadFile(pidFileName)
	if pid := strings.TrimSpace(string(b)); err == nil && pid != "" {
		return pid
	}
	return "unknown"
}

// flockHolder finds the FLOCK entry for f's inode in /proc/locks ("1: FLOCK
// ADVISORY WRITE <pid> <major>:<minor>:<inode> 0 EOF", major and minor in
// hex); "" when there is none or no /proc.
func flockHolder(f *os.File) string {
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	dev := uint64(st.Dev)
	major := (dev>>8)&0xfff | (dev>>32)&^0xfff // Linux's dev_t encoding
	minor := dev&0xff | (dev>>12)&^0xff
	want := fmt.Sprintf("%02x:%02x:%d", major, minor, st.Ino)
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return ""
	}
	defer locks.Close()
	sc := bufio.NewScanner(locks)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// A waiter's line has "->" after the id; the holder's does not.
		if len(fields) >= 6 && fields[1] == "FLOCK" && fields[5] == want {
			return fields[4]
		}
	}
	return ""
}
