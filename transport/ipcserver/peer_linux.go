package ipcserver

import "golang.org/x/sys/unix"

// peerPID is SO_PEERCRED's pid of the socket fd (0: unknown).
func peerPID(fd uintptr) int {
	cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return 0
	}
	return int(cred.Pid)
}
