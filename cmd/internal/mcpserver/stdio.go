package mcpserver

import (
	"os"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioTransport is the MCP server's stdin and stdout (lineTransport, its
// tools/call served by direct). Go reads and writes a pipe that is in
// blocking mode with a system call that holds its thread, and its P, until
// data comes; with the server's one P (mcpProcs) every other goroutine —
// the session's set-up, the answer of the daemon a tool call waits for —
// then waits for the runtime to take the P back (up to 10 ms when the
// process is idle: the first tool answer took 34 ms against 18). A pipe or
// a socket is therefore read and written through a duplicate of its
// descriptor set non-blocking, which parks the goroutine in Go's poller
// instead. A terminal or a file is used as it is: a terminal's mode is
// shared with the shell that started the server. Stdout is never closed:
// the server may still log a last line.
func stdioTransport(direct *directCalls) mcp.Transport {
	return &lineTransport{r: pollable(os.Stdin), w: pollable(os.Stdout), direct: direct}
}

// pollable is f, or when f is a pipe or a socket a non-blocking duplicate
// of its descriptor (O_NONBLOCK belongs to the open file, which only this
// process and its children share; children the server starts get
// /dev/null).
func pollable(f *os.File) *os.File {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return f
	}
	sc, err := f.SyscallConn() // not f.Fd(), which would set a pollable f blocking
	if err != nil {
		return f
	}
	var fd int
	var dupErr error
	if err := sc.Control(func(orig uintptr) { fd, dupErr = syscall.Dup(int(orig)) }); err != nil || dupErr != nil {
		return f
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return f
	}
	return os.NewFile(uintptr(fd), f.Name())
}
