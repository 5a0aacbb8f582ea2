package ipcserver

import (
	"context"
	"net"
)

// PeerPID is the pid of the process at the other end of the request's
// Unix socket connection, as the kernel reports it (peerPID); false over
// TCP, or where the system does not say.
func PeerPID(ctx context.Context) (int, bool) {
	c, ok := ctx.Value(connKey{}).(*net.UnixConn)
	if !ok {
		return 0, false
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, false
	}
	pid := 0
	if err := raw.Control(func(fd uintptr) { pid = peerPID(fd) }); err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}
