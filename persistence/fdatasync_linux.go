package persistence

import "syscall"

// fdatasync is fdatasync(2): SQLite's sync where the platform has it.
func fdatasync(fd int) error { return syscall.Fdatasync(fd) }
