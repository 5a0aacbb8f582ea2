package ipcserver

import "golang.org/x/sys/unix"

// peerPID is LOCAL_PEERPID of the socket fd (0: unknown).
func peerPID(fd uintptr) int {
	pid, err := unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID)
	if err != nil {
		return 0
	}
	return pid
}
