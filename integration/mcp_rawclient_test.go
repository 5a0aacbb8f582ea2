package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawMCP is an MCP client of a few lines over a server's stdio: the
// initialize handshake, then one tools/call at a time, each a line of
// JSON-RPC written and the line answering it read back, its notifications
// skipped. A benchmark drives the server with it so that what it measures
// is the server: the official SDK's client spends as much CPU a call as
// the server it talks to, on the same two cores.
type rawMCP struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	pipe *os.File // out's, to bound a wait for an answer
	out  *bufio.Reader
	next int
	line []byte
}

// rawResponse is what rawMCP reads of a line: a notification has no id.
type rawResponse struct {
	ID     *int `json:"id"`
	Result struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// startRawMCP starts claudemesh-mcp as the agent session name on e's
// daemon and runs the initialize handshake (for a benchmark, or a test of
// what a client writes byte by byte). Its GODEBUG is the
// benchmark's, as the daemon's
// is: awakeSetting (keepMonitorAwake), or what the benchmark was started
// with when that names schedtrace (schedtrace=0 measures every process
// with the runtime's monitor sleeping deeply: the code before
// cmd/internal/sysmon).
func startRawMCP(b testing.TB, e *env, name string) *rawMCP {
	c := &rawMCP{cmd: exec.Command(mcpBinPath, "--name", name)}
	c.cmd.Env = e.environ()
	c.cmd.Stderr = os.Stderr
	var err error
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	c.pipe = out.(*os.File)
	c.out = bufio.NewReaderSize(out, 1<<16)
	if err := c.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.close)
	if _, err := c.request("initialize", map[string]any{"protocolVersion": "2025-06-18",
		"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "bench", "version": "1"}}); err != nil {
		b.Fatal("initialize: ", err)
	}
	if _, err := fmt.Fprintln(c.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		b.Fatal(err)
	}
	return c
}

// callTool calls the tool and fails on a protocol error or a tool's error
// result.
func (c *rawMCP) callTool(name string, args map[string]any) error {
	r, err := c.request("tools/call", map[string]any{"name": name, "arguments": args})
	if err == nil && r.Result.IsError {
		err = fmt.Errorf("%s: %v", name, r.Result.Content)
	}
	return err
}

func (c *rawMCP) request(method string, params any) (*rawResponse, error) {
	if err := c.write(method, params); err != nil {
		return nil, err
	}
	for {
		line, err := c.readLine()
		if err != nil {
			return nil, err
		}
		var r rawResponse
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("%w: %.200s", err, line)
		}
		if r.ID == nil {
			continue // a notification
		}
		if *r.ID != c.next {
			return nil, fmt.Errorf("answer to %d, waiting for %d", *r.ID, c.next)
		}
		if r.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, r.Error.Message)
		}
		return &r, nil
	}
}

// callLine calls a tool and returns the line of its answer undecoded, for
// an answer so large (fetch_inbox of 1,000 messages) that decoding it
// would be much of what the benchmark measures: the answer is the line
// that begins with its id, as the server writes it; lines without an id
// (notifications) are skipped.
func (c *rawMCP) callLine(name string, args map[string]any) ([]byte, error) {
	if err := c.write("tools/call", map[string]any{"name": name, "arguments": args}); err != nil {
		return nil, err
	}
	answer := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,`, c.next)
	for {
		line, err := c.readLine()
		if err != nil || bytes.HasPrefix(line, answer) {
			return line, err
		}
		if bytes.HasPrefix(line, []byte(`{"jsonrpc":"2.0","id":`)) {
			return nil, fmt.Errorf("an answer to another request, waiting for %d: %.200s", c.next, line)
		}
	}
}

// write writes the next request.
func (c *rawMCP) write(method string, params any) error {
	c.next++
	c.line = c.line[:0]
	c.line = fmt.Appendf(c.line, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":`, c.next, method)
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	c.line = append(append(c.line, p...), "}\n"...)
	if _, err := c.in.Write(c.line); err != nil {
		return err
	}
	return c.pipe.SetReadDeadline(time.Now().Add(mcpDeadline))
}

// readLine reads the server's next line, however long.
func (c *rawMCP) readLine() ([]byte, error) {
	line, err := c.out.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) { // an answer longer than the buffer (fetch_inbox of 1,000 messages)
		head := append([]byte(nil), line...) // the next read reuses the buffer
		var rest []byte
		rest, err = c.out.ReadBytes('\n')
		line = append(head, rest...)
	}
	return line, err
}

func (c *rawMCP) close() {
	c.in.Close()
	c.cmd.Wait()
}

// TestMCPLineTooLong: a line longer than claudemesh-mcp takes
// (mcp.DefaultMaxLineLength) is answered at once with an error that names
// the limit, id null (its id cannot be read), and the session goes on.
func TestMCPLineTooLong(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	c := startRawMCP(t, e, "long-line")
	line := `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"send_message","arguments":{"to":"x","message":"` +
		strings.Repeat("a", mcp.DefaultMaxLineLength) + `"}}}` + "\n"
	if _, err := io.WriteString(c.in, line); err != nil {
		t.Fatal(err)
	}
	if err := c.pipe.SetReadDeadline(time.Now().Add(mcpDeadline)); err != nil {
		t.Fatal(err)
	}
	answer, err := c.readLine()
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"a message longer than %d bytes`, mcp.DefaultMaxLineLength)
	if err != nil || !strings.HasPrefix(string(answer), want) {
		t.Fatalf("the answer to a line of %d bytes: %.200s %v; want %s…", len(line), answer, err, want)
	}
	if _, err := c.request("ping", map[string]any{}); err != nil {
		t.Errorf("a ping after the line too long: %v", err)
	}
}
