//go:build !linux

package persistence

import "syscall"

// fdatasync is fsync(2) where there is no fdatasync (macOS), as SQLite
// syncs there unless PRAGMA fullfsync is on, which the daemon leaves off.
func fdatasync(fd int) error { return syscall.Fsync(fd) }
