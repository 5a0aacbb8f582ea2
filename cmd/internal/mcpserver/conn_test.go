package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wire is a client's end of a server's stdio: JSON-RPC lines written, and
// the server's lines read.
type wire struct {
	t *testing.T
	w io.WriteCloser
	r *bufio.Reader
}

func (c *wire) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.w, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

func (c *wire) next() string {
	c.t.Helper()
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("reading the server's next line: %v", err)
	}
	return strings.TrimSuffix(line, "\n")
}

func (c *wire) call(line string) string {
	c.t.Helper()
	c.send(line)
	return c.next()
}

// served is a server of echo (and of block, which waits for its call's
// end), counting the calls whose request carried no SDK session — those
// directCalls served.
type served struct {
	*wire
	ss      *mcp.ServerSession
	calls   atomic.Int32 // echo's
	direct  atomic.Int32 // echo's without a session
	started chan struct{}
	ended   chan error // block's context error
}

// serveEcho serves echo on pipes: through lineTransport with directCalls
// (ours), or through the SDK's IOTransport.
func serveEcho(t *testing.T, ours bool, max int) *served {
	s := &served{started: make(chan struct{}, 1), ended: make(chan error, 1)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	tools := &toolSet{srv: srv, handlers: map[string]mcp.ToolHandler{}}
	counted := func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, *echoOut, error) {
		s.calls.Add(1)
		if req.Session == nil {
			s.direct.Add(1)
		}
		return echo(ctx, req, in)
	}
	addTool(tools, echoTool(), counted)
	addTool(tools, &mcp.Tool{Name: "block", Description: "Wait."}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, *echoOut, error) {
		s.started <- struct{}{}
		<-ctx.Done()
		s.ended <- ctx.Err()
		return nil, nil, ctx.Err()
	})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var tr mcp.Transport = &mcp.IOTransport{Reader: inR, Writer: outW}
	if ours {
		version := func() string {
			if p := s.ss.InitializeParams(); p != nil {
				return p.ProtocolVersion
			}
			return ""
		}
		tr = &lineTransport{r: inR, w: outW, max: max, direct: newDirectCalls(tools.handlers, version)}
	}
	ss, err := srv.Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.ss = ss
	t.Cleanup(func() { inW.Close(); ss.Close(); outR.Close() })
	s.wire = &wire{t: t, w: inW, r: bufio.NewReader(outR)}
	return s
}

func initialize(c *wire, version string) string {
	c.t.Helper()
	res := c.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return res
}

// TestDirectCalls: the tools/call requests that lineTransport serves
// itself are answered with the very bytes the SDK writes for them (its
// own transport and dispatch), and those it leaves to the SDK — an
// unknown tool, params it does not know, the protocol's own _meta, a
// call before the handshake — are answered by the SDK as before.
func TestDirectCalls(t *testing.T) {
	ours, sdk := serveEcho(t, true, 0), serveEcho(t, false, 0)
	before := `{"jsonrpc":"2.0","id":"early","method":"tools/call","params":{"name":"echo","arguments":{"to":"bob"}}}`
	if a, b := ours.call(before), sdk.call(before); a != b {
		t.Errorf("a call before the handshake:\n ours %s\n sdk  %s", a, b)
	}
	if a, b := initialize(ours.wire, "2025-06-18"), initialize(sdk.wire, "2025-06-18"); a != b {
		t.Fatalf("initialize:\n ours %s\n sdk  %s", a, b)
	}
	direct := []string{
		`{"to":"bob"}`, `{"to":"bob","count":3,"tags":["a"],"priority":"now"}`, `{"to":"text","count":2}`,
		`{"to":"nil"}`, `{"to":"fail"}`, `{"to":"wire"}`, `null`, `{}`, `{"to":""}`, `{"to":7}`, `{"to":"bob","TO":"eve"}`,
		`{"To":"bob"}`, `{"to":"bob","extra":true}`, `{"to":"bob","priority":"urgent"}`, `{"to":"bob","count":11}`,
		`{"to":"bob","count":1.5}`, `{"to":"bob","tags":"a"}`, `{"to":"bob","to":"eve"}`, `[]`, `"bob"`,
		`{"to":"<b>&amp;</b> \u2028"}`,
	}
	var lines []string
	for i, args := range direct {
		lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":%s}}`, i+1, args))
	}
	lines = append(lines,
		`{"jsonrpc":"2.0","id":"s-1","method":"tools/call","params":{"name":"echo","arguments":{"to":"bob"}}}`,
		`{"jsonrpc":"2.0","id":2.0,"method":"tools/call","params":{"name":"echo","arguments":{"to":"bob"}}}`,
		`{"params":{"arguments":{"to":"bob"},"name":"echo"},"method":"tools/call","id":3,"jsonrpc":"2.0"}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"to":"bob"},"_meta":{"progressToken":5}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"to":"bob"},"_meta":{"claudecode/toolUseId":"toolu_1"}}}`,
	)
	for _, line := range lines {
		if a, b := ours.call(line), sdk.call(line); a != b {
			t.Errorf("%s:\n ours %s\n sdk  %s", line, a, b)
		}
	}
	if n := ours.direct.Load(); n == 0 || n != ours.calls.Load() || n != sdk.calls.Load() {
		t.Errorf("%d of our %d calls of echo were served directly, the SDK's %d; want all of them", n, ours.calls.Load(), sdk.calls.Load())
	}
	served := ours.direct.Load()
	for _, line := range []string{ // left to the SDK
		`{"jsonrpc":"2.0","id":100,"method":"tools/call","params":{"name":"nope","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":101,"method":"tools/call","params":{"name":"echo","arguments":{"to":"bob"},"task":{"ttl":1000}}}`,
		`{"jsonrpc":"2.0","id":102,"method":"tools/call","params":{"name":"echo","arguments":{"to":"bob"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`{"jsonrpc":"2.0","id":103,"method":"tools/call","params":{"Name":"echo","arguments":{"to":"bob"}}}`,
		`{"jsonrpc":"2.0","id":104,"method":"tools/call","params":{"name":"echo","arguments":{"to":"bob"},"_meta":null}}`,
		`{"jsonrpc":"2.0","id":105,"method":"tools/call","params":[]}`,
		`{"jsonrpc":"2.0","id":106,"method":"tools/call","params":{"name":"echo","arguments":{"to":"bob"}},"extra":1}`,
		`{"jsonrpc":"2.0","id":107,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":108,"method":"ping"}`,
	} {
		if a, b := ours.call(line), sdk.call(line); a != b {
			t.Errorf("%s:\n ours %s\n sdk  %s", line, a, b)
		}
	}
	if ours.direct.Load() != served {
		t.Errorf("%d calls left to the SDK were served directly", ours.direct.Load()-served)
	}
	if sdk.direct.Load() != 0 {
		t.Errorf("the SDK's transport served %d calls without a session", sdk.direct.Load())
	}
}

// TestLineConn: what lineTransport answers that the SDK's transport did
// not — a line that is not a message, one too long, a batch — and a
// call cancelled by the client.
func TestLineConn(t *testing.T) {
	s := serveEcho(t, true, 256)
	for _, c := range []struct{ line, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,`},
		{`{"jsonrpc":"1.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`},
		{`[]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"a batch must be`},
		{`{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"` + strings.Repeat("x", 300) + `"}}`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"a message longer than 256 bytes`},
	} {
		if got := s.call(c.line); !strings.HasPrefix(got, c.want) {
			t.Errorf("%.60s: %s, want %s…", c.line, got, c.want)
		}
	}
	// The session lives on: the handshake, then a batch on 2025-03-26.
	initialize(s.wire, "2025-03-26")
	got := s.call(`[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}},` +
		`{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"echo","arguments":{"to":"bob"}}}]`)
	var batch []map[string]any
	if err := json.Unmarshal([]byte(got), &batch); err != nil || len(batch) != 2 || batch[0]["id"] != "a" || batch[1]["id"] != "b" ||
		batch[1]["result"] == nil {
		t.Errorf("a batch of a ping, a notification and a call: %s, want the two answers in one array", got)
	}
	if s.direct.Load() != 0 {
		t.Error("the batch's call was served directly, not by the SDK")
	}

	s.send(`{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"block","arguments":{}}}`)
	<-s.started
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long","reason":"user"}}`)
	if err := <-s.ended; err != context.Canceled {
		t.Errorf("the cancelled call's context: %v, want canceled", err)
	}
	if got := s.next(); !strings.Contains(got, `"id":"long"`) || !strings.Contains(got, "context canceled") {
		t.Errorf("the cancelled call's answer: %s", got)
	}

	// A line too long that the input's end cuts is answered too, before
	// the session ends.
	cut := serveEcho(t, true, 256)
	if _, err := io.WriteString(cut.w, `{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"`+strings.Repeat("x", 300)); err != nil {
		t.Fatal(err)
	}
	cut.w.Close()
	answer := make(chan string, 1)
	go func() { line, _ := cut.r.ReadString('\n'); answer <- line }()
	select {
	case got := <-answer:
		if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"a message longer than 256 bytes`) {
			t.Errorf("a line too long at the input's end: %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Error("a line too long at the input's end: no answer within 10 s")
	}

	late := serveEcho(t, true, 0)
	initialize(late.wire, "2025-06-18")
	if got := late.call(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`); !strings.Contains(got, errNoBatches) {
		t.Errorf("a batch on 2025-06-18: %s, want %q", got, errNoBatches)
	}
	late.w.Close()
	if err := late.ss.Wait(); err != nil {
		t.Errorf("the session at the end of its input: %v", err)
	}
}

// FuzzLineConn: whatever line a client writes, the connection answers it,
// serves it, or hands it to the SDK — it never panics, and a line that is
// not JSON is answered with a parse error.
func FuzzLineConn(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"to":"bob"}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"echo","arguments":{"to":"bob"},"_meta":{"a":1}}}`))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":1,"method":"ping"}]`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\n\"method\":\"ping\"}"))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out := &lockedBuffer{}
		handlers := map[string]mcp.ToolHandler{"echo": func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		}}
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // closed: what the SDK would read is dropped
		c := &lineConn{w: out, max: 1 << 10, ctx: ctx, cancel: cancel, incoming: make(chan inbound),
			direct: newDirectCalls(handlers, func() string { return "2025-03-26" })}
		r := bufio.NewReaderSize(bytes.NewReader(in), 16)
		for {
			line, err := readLine(r, c.max)
			if line = bytes.TrimSpace(line); len(line) > 0 {
				c.take(bytes.Clone(line))
				if !json.Valid(line) && !out.contains(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,`) {
					t.Fatalf("%q: no parse error", line)
				}
			}
			if err != nil && !errors.Is(err, errLineTooLong) {
				return
			}
		}
	})
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.b.String(), s)
}
