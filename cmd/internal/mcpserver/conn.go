package mcpserver

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/actors/workers/gopool"
)

// lineTransport is the MCP server's stdio connection in place of the
// SDK's IOTransport: one JSON-RPC message (or batch) per line, as the
// protocol's stdio transport defines it, read and written here, and the
// tools/call requests of an initialised session served here too
// (directCalls) rather than through the SDK's dispatch. Everything else —
// the handshake, tools/list, pings, cancellation of the SDK's own
// requests, the sessionless protocol of 2026, batches — goes to the SDK as
// the messages it reads. The reason is speed: a tools/call through the
// SDK took two thirds of claudemesh-mcp's CPU while agents sent mail at
// full speed (its envelope decoded twice through a decoder that allocates
// 32 KiB, once trying it as a batch; a goroutine whose stack grows through
// the middleware's frames; the result encoded twice), the tool itself the
// other third (docs/BENCHMARKS.md, "Agent mail: messages").
//
// Where it differs from the SDK's transport: a line that is not a JSON-RPC
// message is answered with a parse (-32700) or invalid-request (-32600)
// error and the session goes on, where the SDK ended it; so is a line
// longer than mcp.DefaultMaxLineLength, and a batch on a protocol version
// that has none (2025-06-18 and later). A message must fit on its line
// (the protocol forbids embedded newlines; the SDK's decoder also took
// pretty-printed JSON spread over lines).
type lineTransport struct {
	r      io.Reader
	w      io.Writer
	max    int          // the longest line taken; 0: mcp.DefaultMaxLineLength
	direct *directCalls // nil: every message goes to the SDK
}

func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &lineConn{w: t.w, max: cmp.Or(t.max, mcp.DefaultMaxLineLength), direct: t.direct, ctx: ctx, cancel: cancel,
		incoming: make(chan inbound)}
	go c.readLoop(bufio.NewReaderSize(t.r, 64<<10))
	return c, nil
}

// inbound is what the read loop hands the SDK: a message, a batch's
// messages, or the error that ended the input.
type inbound struct {
	msgs []jsonrpc.Message
	err  error
}

type lineConn struct {
	w      io.Writer
	max    int
	direct *directCalls
	// ctx ends when the connection closes: the direct calls' context, and
	// what ends a wait to hand the SDK a message.
	ctx    context.Context
	cancel context.CancelFunc

	incoming chan inbound
	queue    []jsonrpc.Message // a batch's messages not read yet (Read is serial)

	wmu sync.Mutex // one line at a time on w

	batchMu sync.Mutex
	batches map[jsonrpc.ID]*lineBatch // the batch of each request of one not answered yet
}

// lineBatch collects the responses to a batch's requests, written as one
// array once the last is in (JSON-RPC 2.0, as the SDK's transport does).
type lineBatch struct {
	unresolved map[jsonrpc.ID]int
	responses  [][]byte
}

const errNoBatches = "JSON-RPC batches are not part of protocol 2025-06-18 and later; send one message per line"

func (c *lineConn) readLoop(r *bufio.Reader) {
	for {
		line, err := readLine(r, c.max)
		if errors.Is(err, errLineTooLong) {
			c.refuse(jsonrpc.CodeInvalidRequest, fmt.Sprintf("a message longer than %d bytes; it was dropped", c.max))
			continue
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			c.take(bytes.Clone(line)) // the reader's buffer: a message's params may point into it
		}
		if err != nil {
			c.deliver(inbound{err: err}) // io.EOF: the client went away
			return
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its newline; a line over max is
// read to its end and dropped (errLineTooLong), also the last one, which
// the input's end cuts (the next read reports the end). The last line may
// end without a newline, with the error that ended the input.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var long []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(long)+len(frag) > max+1 { // +1: the newline
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, errLineTooLong
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if long != nil {
				frag = append(long, frag...)
			}
			return bytes.TrimSuffix(frag, []byte("\n")), err
		}
		long = append(long, frag...)
	}
}

// take routes one line: a batch, a tools/call served here, or a message
// for the SDK.
func (c *lineConn) take(line []byte) {
	if line[0] == '[' {
		c.takeBatch(line)
		return
	}
	if c.direct != nil && c.direct.take(c, line) {
		return
	}
	if !json.Valid(line) { // the SDK's decoder would stop at the first value's end
		c.refuse(jsonrpc.CodeParseError, "a line that is not one JSON value")
		return
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		c.refuse(jsonrpc.CodeInvalidRequest, err.Error())
		return
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "notifications/cancelled" && c.direct != nil {
		c.direct.cancelled(req.Params) // and the SDK's request of that id, if one is its
	}
	c.deliver(inbound{msgs: []jsonrpc.Message{msg}})
}

func (c *lineConn) takeBatch(line []byte) {
	if c.direct != nil && c.direct.version() >= "2025-06-18" {
		c.refuse(jsonrpc.CodeInvalidRequest, errNoBatches)
		return
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(line, &raws); err != nil || len(raws) == 0 {
		c.refuse(invalidCode(line), "a batch must be a non-empty array of JSON-RPC messages")
		return
	}
	msgs := make([]jsonrpc.Message, len(raws))
	b := &lineBatch{unresolved: map[jsonrpc.ID]int{}}
	for i, raw := range raws {
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			c.refuse(jsonrpc.CodeInvalidRequest, "in a batch: "+err.Error())
			return
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			if _, dup := b.unresolved[req.ID]; dup {
				c.refuse(jsonrpc.CodeInvalidRequest, fmt.Sprintf("a batch with request id %v twice", req.ID.Raw()))
				return
			}
			b.unresolved[req.ID] = len(b.responses)
			b.responses = append(b.responses, nil)
		}
		msgs[i] = msg
	}
	c.batchMu.Lock()
	for id := range b.unresolved {
		if _, taken := c.batches[id]; taken {
			c.batchMu.Unlock()
			c.refuse(jsonrpc.CodeInvalidRequest, fmt.Sprintf("a batch with request id %v, still unanswered in another", id.Raw()))
			return
		}
	}
	if c.batches == nil {
		c.batches = map[jsonrpc.ID]*lineBatch{}
	}
	for id := range b.unresolved {
		c.batches[id] = b
	}
	c.batchMu.Unlock()
	c.deliver(inbound{msgs: msgs})
}

// invalidCode is the error code for a line that is not a message: a
// parse error unless it is JSON.
func invalidCode(line []byte) int64 {
	if json.Valid(line) {
		return jsonrpc.CodeInvalidRequest
	}
	return jsonrpc.CodeParseError
}

// refuse answers a line that is not a message; its id cannot be trusted,
// so the answer's is null (JSON-RPC 2.0).
func (c *lineConn) refuse(code int64, message string) {
	msg, _ := json.Marshal(message)
	_ = c.writeLine(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":null,"error":{"code":%d,"message":%s}}`, code, msg))
}

func (c *lineConn) deliver(in inbound) {
	select {
	case c.incoming <- in:
	case <-c.ctx.Done():
	}
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if len(c.queue) > 0 {
		next := c.queue[0]
		c.queue = c.queue[1:]
		return next, nil
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.ctx.Done():
		return nil, io.EOF
	case in := <-c.incoming:
		if in.err != nil {
			return nil, in.err
		}
		c.queue = in.msgs[1:]
		return in.msgs[0], nil
	}
}

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	if resp, ok := msg.(*jsonrpc.Response); ok {
		var inBatch bool
		if data, inBatch = c.answerBatch(resp.ID, data); inBatch && data == nil {
			return nil // the batch is not complete yet
		}
	}
	return c.writeLine(data)
}

// answerBatch records the response data to a batch's request; it returns
// the batch's array when data completes it, and reports whether id was
// one of a batch. A response to no batch's request is returned as it is.
func (c *lineConn) answerBatch(id jsonrpc.ID, data []byte) ([]byte, bool) {
	c.batchMu.Lock()
	defer c.batchMu.Unlock()
	b, ok := c.batches[id]
	if !ok {
		return data, false
	}
	delete(c.batches, id)
	b.responses[b.unresolved[id]] = data
	delete(b.unresolved, id)
	if len(b.unresolved) > 0 {
		return nil, true
	}
	return append(append([]byte("["), bytes.Join(b.responses, []byte(","))...), ']'), true
}

func (c *lineConn) writeLine(data []byte) error {
	data = append(data, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.w.Write(data)
	return err
}

// Close ends the session: Read returns io.EOF, and the direct calls'
// contexts are cancelled. Stdin is left to the read loop, which ends with
// the input (a read of stdin cannot be interrupted), and stdout open: the
// server may still log a last line.
func (c *lineConn) Close() error {
	c.cancel()
	return nil
}

func (c *lineConn) SessionID() string { return "" }

// directCalls serves tools/call requests without the SDK's dispatch, with
// the tools' own handlers (addTool's, recorded by toolSet): the same
// arguments checks, results and errors (TestDirectCalls holds the two
// paths to the same bytes). It takes a call only when the SDK would have
// nothing else to do for it: the session was initialised by the handshake
// on a protocol version of before 2026 (the sessionless protocol's
// requests carry what the SDK must check), the params hold only name,
// arguments and _meta, none of the protocol's own _meta keys, and the tool
// is one of ours. Anything else goes to the SDK, which answers it as
// before. A handler so called has no SDK session (req.Session is nil): a
// tool that would notify its caller mid-call (progress, logging) must not
// be served here.
type directCalls struct {
	tools   map[string]mcp.ToolHandler // complete before the session starts; read-only after
	version func() string              // the session's protocol version, "" before its handshake

	mu       sync.Mutex
	inflight map[jsonrpc.ID]context.CancelFunc

	// calls runs them, on goroutines whose stacks have already grown to
	// what a call needs.
	calls *gopool.Pool
}

// newDirectCalls serves tools' calls for a session whose protocol version
// version tells.
func newDirectCalls(tools map[string]mcp.ToolHandler, version func() string) *directCalls {
	return &directCalls{tools: tools, version: version, calls: gopool.New(4)}
}

// directVersions are the protocol versions whose tools/call directCalls
// serves: those before the sessionless protocol.
var directVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

// take serves line if it is a tools/call it may take, reporting whether
// it did: exactly the keys jsonrpc ("2.0"), id (a number or a string),
// method and params, as the SDK reads them (case-sensitively), on a
// protocol version of directVersions.
func (d *directCalls) take(c *lineConn, line []byte) bool {
	if !slices.Contains(directVersions, d.version()) {
		return false
	}
	var env map[string]json.RawMessage
	if json.Unmarshal(line, &env) != nil || len(env) != 4 || string(env["jsonrpc"]) != `"2.0"` ||
		string(env["method"]) != `"tools/call"` {
		return false
	}
	var rawID any
	if json.Unmarshal(env["id"], &rawID) != nil {
		return false
	}
	id, err := jsonrpc.MakeID(rawID)
	if err != nil || !id.IsValid() {
		return false
	}
	p, h := d.params(env["params"])
	if h == nil {
		return false
	}
	ctx, cancel := context.WithCancel(c.ctx)
	d.mu.Lock()
	if _, dup := d.inflight[id]; dup {
		d.mu.Unlock()
		cancel()
		return false // the SDK answers a reused id as it would
	}
	if d.inflight == nil {
		d.inflight = map[jsonrpc.ID]context.CancelFunc{}
	}
	d.inflight[id] = cancel
	d.mu.Unlock()
	d.calls.Go(func() { d.call(ctx, cancel, c, id, h, p) })
	return true
}

// params decodes a tools/call's params when directCalls may serve it:
// only name, arguments and _meta, a tool of ours, no _meta key of the
// protocol's own ("io.modelcontextprotocol/…").
func (d *directCalls) params(raw json.RawMessage) (*mcp.CallToolParamsRaw, mcp.ToolHandler) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return nil, nil
	}
	for k := range fields {
		if k != "name" && k != "arguments" && k != "_meta" {
			return nil, nil
		}
	}
	var p mcp.CallToolParamsRaw
	if json.Unmarshal(fields["name"], &p.Name) != nil {
		return nil, nil
	}
	h := d.tools[p.Name]
	if h == nil {
		return nil, nil
	}
	p.Arguments = fields["arguments"]
	if meta, ok := fields["_meta"]; ok {
		if json.Unmarshal(meta, &p.Meta) != nil || p.Meta == nil {
			return nil, nil
		}
		for k := range p.Meta {
			if strings.HasPrefix(k, "io.modelcontextprotocol/") {
				return nil, nil
			}
		}
	}
	return &p, h
}

func (d *directCalls) call(ctx context.Context, cancel context.CancelFunc, c *lineConn, id jsonrpc.ID, h mcp.ToolHandler,
	p *mcp.CallToolParamsRaw) {
	defer func() {
		d.mu.Lock()
		delete(d.inflight, id)
		d.mu.Unlock()
		cancel()
	}()
	res, err := h(ctx, &mcp.CallToolRequest{Params: p})
	if err == nil {
		if res == nil { // addTool's handlers always give one
			res = &mcp.CallToolResult{}
		}
		if res.Content == nil { // as the SDK: [] rather than null
			res.Content = []mcp.Content{}
		}
		var line []byte
		if line, err = resultLine(id, res); err == nil {
			_ = c.writeLine(line) // a failed write ends the session's read too
			return
		}
	}
	if line, eerr := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: err}); eerr == nil {
		_ = c.writeLine(line)
	}
}

// resultLine is the response carrying res, in the bytes the SDK writes:
// its keys in the same order, nothing HTML-escaped.
func resultLine(id jsonrpc.ID, res *mcp.CallToolResult) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	if err := enc.Encode(id.Raw()); err != nil { // an int64 or a string
		return nil, err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	b.WriteString(`,"result":`)
	if line, ok := appendToolResult(b.Bytes(), res); ok { // result_json.go
		return append(line, '}'), nil
	}
	if err := enc.Encode(res); err != nil {
		return nil, err
	}
	b.Truncate(b.Len() - 1)
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (d *directCalls) cancelled(raw json.RawMessage) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return
	}
	d.mu.Lock()
	cancel := d.inflight[id]
	d.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// toolSet is the server's tools: registered with the SDK, with their
// annotations (toolAnnotations), and their handlers kept for directCalls.
type toolSet struct {
	srv      *mcp.Server
	handlers map[string]mcp.ToolHandler
}

func (t *toolSet) AddTool(tool *mcp.Tool, h mcp.ToolHandler) {
	if tool.Annotations == nil {
		tool.Annotations = toolAnnotations[tool.Name]
	}
	t.srv.AddTool(tool, h)
	t.handlers[tool.Name] = h
}
