package ipcserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/claudemesh/claudemesh-go/config"
)

// ListenUnix binds the daemon socket at path with mode 0600. A path left by
// an earlier process is dialed first: if something answers, another daemon
// owns it and ListenUnix refuses; otherwise it is removed, but only if it is
// a socket. Closing the listener leaves the socket file: the caller removes
// it, once it has made sure the file at path is still its own (the path may
// name another daemon's socket by then).
func ListenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket; move it away", path)
		}
		if c, err := net.DialTimeout("unix", path, 100*time.Millisecond); err == nil {
			c.Close()
			return nil, fmt.Errorf("another daemon answers on %s", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	l.SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		os.Remove(path)
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	return l, nil
}

// ListenTCP binds addr, which must be a loopback address; port 0 lets the
// kernel pick one. The bound port is written to portFile (decimal and a
// newline), for clients to find.
func ListenTCP(addr, portFile string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("tcp address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, errors.New("the TCP listener binds loopback only (127.0.0.1, [::1] or localhost), not " + host)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := config.WriteFileAtomic(portFile, []byte(strconv.Itoa(port)+"\n"), 0o644); err != nil {
		l.Close()
		return nil, fmt.Errorf("write %s: %w", portFile, err)
	}
	return l, nil
}
