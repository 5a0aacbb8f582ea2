//go:build !linux && !darwin

package ipcserver

// peerPID is unknown (0) where the system has no way the daemon uses.
func peerPID(uintptr) int { return 0 }
