//lint:file-ignore SA1019 the tests read the logging notifications the server still sends (deprecated in the protocol, kept through its window)

package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
)

// mcpDeadline bounds one MCP exchange and each wait for a notification.
const mcpDeadline = 20 * time.Second

// mcpProc is a `claudemesh mcp` child process driven by the SDK's client
// over its stdin/stdout, as Claude Code drives it.
type mcpProc struct {
	t       *testing.T
	name    string
	cmd     *exec.Cmd
	cs      *mcp.ClientSession
	stderr  *syncBuffer
	logs    chan *mcp.LoggingMessageParams // notifications/message
	channel chan channelNote               // notifications/claude/channel
	updated chan string                    // notifications/resources/updated: the URI
}

// channelNote is the params of a notifications/claude/channel.
type channelNote struct {
	Content string            `json:"content"`
	Meta    map[string]string `json:"meta"`
}

// mcpOptions: channel declares the claude/channel capability, and the
// client then also asks for log notifications at info (the classic
// handshake, where logging/setLevel exists).
type mcpOptions struct {
	channel bool
	env     []string
	lean    bool     // claudemesh-mcp instead of claudemesh mcp
	dir     string   // its working directory ("": the test's, in this repository)
	args    []string // more arguments (--tools agent-mail)
}

// localAgentsEnv is an env whose daemon runs the embedded broker for its
// local mesh (no mesh joined), so that sessions can reach each other.
func localAgentsEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	if err := os.Remove(filepath.Join(e.configDir, "config.json")); err != nil {
		t.Fatal(err)
	}
	return e
}

// startMCP starts `claudemesh mcp --name name` (o.lean:
// `claudemesh-mcp --name name`) and connects to it.
func startMCP(t *testing.T, e *env, name string, o mcpOptions) *mcpProc {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"mcp", "--name", name}, o.args...)...)
	if o.lean {
		cmd = exec.Command(mcpBinPath, append([]string{"--name", name}, o.args...)...)
	}
	cmd.Env, cmd.Dir = append(e.environ(), o.env...), o.dir
	p := &mcpProc{t: t, name: name, cmd: cmd, stderr: &syncBuffer{}, logs: make(chan *mcp.LoggingMessageParams, 64), channel: make(chan channelNote, 64),
		updated: make(chan string, 64)}
	cmd.Stderr = p.stderr
	opts := &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) { p.logs <- r.Params },
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { p.updated <- r.Params.URI }}
	var sopts *mcp.ClientSessionOptions
	if o.channel {
		opts.Capabilities = &mcp.ClientCapabilities{Experimental: map[string]any{"claude/channel": map[string]any{}}}
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "claudemesh-integration", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), mcpDeadline)
	defer cancel()
	cs, err := client.Connect(ctx, &channelTap{inner: &mcp.CommandTransport{Command: cmd}, notes: p.channel}, sopts)
	if err != nil {
		t.Fatalf("connect to claudemesh mcp: %v; stderr:\n%s", err, p.stderr)
	}
	p.cs = cs
	t.Cleanup(func() { p.close() })
	if o.channel {
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatalf("logging/setLevel: %v", err)
		}
	}
	return p
}

// close ends the session: stdin closes, the server deregisters and exits.
func (p *mcpProc) close() { _ = p.cs.Close() }

// call calls a tool; a protocol error fails the test, a tool error does not.
func (p *mcpProc) call(name string, args any) *mcp.CallToolResult {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mcpDeadline)
	defer cancel()
	res, err := p.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		p.t.Fatalf("%s: tools/call %s: %v; stderr:\n%s", p.name, name, err, p.stderr)
	}
	return res
}

// mustCall calls a tool that must succeed and decodes its structured
// result into out (nil: not decoded).
func (p *mcpProc) mustCall(name string, args, out any) *mcp.CallToolResult {
	p.t.Helper()
	res := p.call(name, args)
	if res.IsError {
		p.t.Fatalf("%s: %s(%v) is a tool error: %s", p.name, name, args, text(res))
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			p.t.Fatalf("%s: %s structured content %s: %v", p.name, name, b, err)
		}
	}
	return res
}

// text is a tool result's text.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

type peersResult struct {
	You   string `json:"you"`
	Peers []struct {
		Name   string `json:"name"`
		Pubkey string `json:"pubkey"`
		Status string `json:"status"`
		You    bool   `json:"you"`
	} `json:"peers"`
}

type checkResult struct {
	Messages []struct {
		ID   string `json:"id"`
		From string `json:"from"`
		Body string `json:"body"`
		Kind string `json:"kind"`
	} `json:"messages"`
	More bool `json:"more"`
}

type sendResult struct {
	ClientMessageID string `json:"client_message_id"`
	Status          string `json:"status"`
	ResolvedTo      string `json:"resolved_to"`
	RecipientOnline *bool  `json:"recipient_online"`
}

// waitPeer waits until p's list_peers shows a peer named name.
func (p *mcpProc) waitPeer(name string) {
	p.t.Helper()
	wait.For(p.t, e2eConnectDeadline, p.name+" to see "+name+" in list_peers", func() bool {
		var r peersResult
		res := p.call("list_peers", map[string]any{})
		if res.IsError {
			return false
		}
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &r)
		return slices.ContainsFunc(r.Peers, func(q struct {
			Name   string `json:"name"`
			Pubkey string `json:"pubkey"`
			Status string `json:"status"`
			You    bool   `json:"you"`
		}) bool {
			return q.Name == name
		})
	})
}

// sendUntilAccepted calls send_message with a fixed client_message_id
// until the daemon takes it (a peer's name resolves only once it is
// online again): retries never deliver twice.
func (p *mcpProc) sendUntilAccepted(args map[string]any) {
	p.t.Helper()
	wait.For(p.t, e2eDeliverDeadline, p.name+" to send "+args["client_message_id"].(string), func() bool {
		return !p.call("send_message", args).IsError
	})
}

// nextChannel waits for p's next channel notification.
func (p *mcpProc) nextChannel() channelNote {
	p.t.Helper()
	select {
	case n := <-p.channel:
		return n
	case <-time.After(mcpDeadline):
		p.t.Fatalf("%s: no notifications/claude/channel within %s; stderr:\n%s", p.name, mcpDeadline, p.stderr)
	}
	return channelNote{}
}

// channelTap is the client's transport with the channel notifications
// (which the SDK has no handler for) taken out and handed to notes.
type channelTap struct {
	inner mcp.Transport
	notes chan<- channelNote
}

func (t *channelTap) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &tappedConn{Connection: c, notes: t.notes}, nil
}

type tappedConn struct {
	mcp.Connection
	notes chan<- channelNote
}

func (c *tappedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return nil, err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || req.Method != "notifications/claude/channel" {
			return msg, nil
		}
		var n channelNote
		if err := json.Unmarshal(req.Params, &n); err == nil {
			c.notes <- n
		}
	}
}

// TestMCPTools: `claudemesh mcp` lists its tools, each named in its
// instructions, the four core ones with typed input schemas whose every
// argument is described; bad arguments are tool errors
// that send nothing; with the daemon stopped a tool says how to start it.
func TestMCPTools(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	d := startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	a := startMCP(t, e, "alice", mcpOptions{})

	ctx, cancel := context.WithTimeout(context.Background(), mcpDeadline)
	defer cancel()
	tools, err := a.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tool := range tools.Tools {
		byName[tool.Name] = tool
	}
	// Every tool is named in the server's instructions and described, and
	// so is each of its arguments.
	instructions := a.cs.InitializeResult().Instructions
	for name, tool := range byName {
		b, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Properties map[string]struct {
				Description string `json:"description"`
			} `json:"properties"`
		}
		if !strings.Contains(instructions, name) || len(tool.Description) < 20 || json.Unmarshal(b, &schema) != nil {
			t.Errorf("%s: in the instructions %v, description %q", name, strings.Contains(instructions, name), tool.Description)
		}
		for arg, p := range schema.Properties {
			if len(p.Description) < 10 {
				t.Errorf("%s.%s has no description", name, arg)
			}
		}
	}
	want := map[string][]string{"send_message": {"to", "message"}, "check_messages": nil, "list_peers": nil, "set_status": nil}
	for name, required := range want {
		tool := byName[name]
		if tool == nil {
			t.Fatalf("tool %s not listed (got %d tools)", name, len(byName))
		}
		var schema struct {
			Type       string   `json:"type"`
			Required   []string `json:"required"`
			Properties map[string]struct {
				Type        any    `json:"type"`
				Description string `json:"description"`
				Enum        []any  `json:"enum"`
			} `json:"properties"`
			AdditionalProperties *bool `json:"additionalProperties"`
		}
		b, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(b, &schema); err != nil || schema.Type != "object" || tool.Description == "" {
			t.Fatalf("%s: input schema %s, description %q", name, b, tool.Description)
		}
		slices.Sort(schema.Required)
		slices.Sort(required)
		if !slices.Equal(schema.Required, required) {
			t.Errorf("%s requires %v, want %v", name, schema.Required, required)
		}
		for arg, p := range schema.Properties {
			if len(p.Description) < 10 {
				t.Errorf("%s.%s has no description: %s", name, arg, b)
			}
		}
		if schema.AdditionalProperties == nil || *schema.AdditionalProperties {
			t.Errorf("%s takes unknown arguments: %s", name, b)
		}
	}
	if p := byName["send_message"]; p != nil {
		b, _ := json.Marshal(p.InputSchema)
		if !strings.Contains(string(b), `"enum":["now","next","low"]`) {
			t.Errorf("send_message.priority is not the enum now|next|low: %s", b)
		}
	}

	before := len(listAll(t, c, ""))
	for _, bad := range []map[string]any{
		{"to": "*", "message": ""},
		{"to": "*", "message": "   "},
		{"to": "", "message": "x"},
		{"to": "*", "message": "x", "priority": "urgent"},
		{"to": "*", "message": "x", "priorty": "now"},
		{"to": "*"},
		{"to": "*", "message": "x", "client_message_id": "has space"},
		{"to": "*", "message": strings.Repeat("x", 32<<10+1)},
		{"to": "nobody-here", "message": "x"},
	} {
		res := a.call("send_message", bad)
		if !res.IsError || text(res) == "" || strings.Contains(text(res), "goroutine") || strings.HasPrefix(text(res), "{") {
			t.Errorf("send_message(%.80v): IsError %v, text %q", bad, res.IsError, text(res))
		}
	}
	if res := a.call("send_message", map[string]any{"to": "nobody-here", "message": "x"}); !strings.Contains(text(res), "list_peers") {
		t.Errorf("an unknown peer's error does not point to list_peers: %q", text(res))
	}
	if res := a.call("set_status", map[string]any{}); !res.IsError {
		t.Errorf("set_status with nothing to set: not an error: %q", text(res))
	}
	if res := a.call("set_status", map[string]any{"status": "asleep"}); !res.IsError {
		t.Errorf("set_status asleep: not an error: %q", text(res))
	}
	if after := len(listAll(t, c, "")); after != before {
		t.Fatalf("bad arguments changed the outbox: %d rows, then %d", before, after)
	}

	var sent sendResult
	a.mustCall("send_message", map[string]any{"to": "*", "message": "hello team", "client_message_id": "mcp-tools-1"}, &sent)
	if sent.ClientMessageID != "mcp-tools-1" || sent.Status != "queued" || sent.RecipientOnline != nil {
		t.Errorf("send_message to #team: %+v", sent)
	}
	a.mustCall("send_message", map[string]any{"to": "*", "message": "hello team", "client_message_id": "mcp-tools-1"}, &sent)
	if rows := listAll(t, c, ""); len(rows) != before+1 {
		t.Errorf("a retried send_message with the same client_message_id: %d rows, want %d", len(rows), before+1)
	}
	var set struct {
		Applied []string `json:"applied"`
	}
	a.mustCall("set_status", map[string]any{"status": "working", "summary": "writing tests"}, &set)
	wait.For(t, e2eConnectDeadline, "alice's status in list_peers", func() bool {
		var r peersResult
		a.mustCall("list_peers", map[string]any{}, &r)
		for _, p := range r.Peers {
			if p.You && p.Name == "alice" && p.Status == "working" {
				return true
			}
		}
		return false
	})

	d.stop()
	res := a.call("list_peers", map[string]any{})
	if !res.IsError || !strings.Contains(text(res), "claudemesh daemon up") {
		t.Errorf("list_peers with the daemon stopped: IsError %v, %q", res.IsError, text(res))
	}
	t.Log("checked: every tool named in the instructions and described; the four core ones with described, closed input schemas; bad arguments are tool errors that send nothing; " +
		"a retried send with its client_message_id is one row; set_status shows in list_peers; a stopped daemon is named with its remedy")
}

// TestMCPStartsDaemon: with no daemon answering, `claudemesh mcp` starts
// one (detached, its output on stderr: stdout carries only the protocol)
// and serves its tools.
func TestMCPStartsDaemon(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	t.Cleanup(func() {
		if r := runCLI(t, e, "daemon", "down"); r.code != 0 {
			t.Errorf("daemon down: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	a := startMCP(t, e, "alice", mcpOptions{})
	var r peersResult
	a.mustCall("list_peers", map[string]any{}, &r)
	if r.You != "alice" || !strings.Contains(a.stderr.String(), "daemon started (pid") {
		t.Fatalf("list_peers %+v; stderr:\n%s", r, a.stderr)
	}
	t.Log("checked: claudemesh mcp starts the daemon when none answers, and its tools work")
}

// TestMCPSessionsMessageByName: two MCP servers (`claudemesh mcp` and the
// lean claudemesh-mcp) are two sessions with keys of their own; each
// messages the other by display name and reads the other's message with
// check_messages exactly once.
func TestMCPSessionsMessageByName(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	a := startMCP(t, e, "alice", mcpOptions{})
	b := startMCP(t, e, "bob", mcpOptions{lean: true})

	// Each server registers its session beside the MCP handshake, not
	// before it answers.
	var list messages.SessionList
	if err := wait.Until(mcpDeadline, "two sessions registered", func() bool {
		st, _, err := getJSON(c, "http://localhost/v1/sessions", &list)
		return err == nil && st == http.StatusOK && len(list.Sessions) == 2
	}); err != nil {
		t.Fatalf("%v (%+v)", err, list.Sessions)
	}
	a.waitPeer("bob")
	b.waitPeer("alice")
	var toBob, toAlice sendResult
	a.mustCall("send_message", map[string]any{"to": "bob", "message": "hello bob"}, &toBob)
	b.mustCall("send_message", map[string]any{"to": "alice", "message": "hello alice", "priority": "now"}, &toAlice)
	if toBob.RecipientOnline == nil || !*toBob.RecipientOnline || len(toBob.ResolvedTo) != 64 || toBob.ClientMessageID == "" {
		t.Errorf("alice's send to bob: %+v", toBob)
	}
	if toBob.ResolvedTo == toAlice.ResolvedTo {
		t.Errorf("both sessions resolve to one key %s", toBob.ResolvedTo)
	}

	for _, x := range []struct {
		p          *mcpProc
		from, body string
	}{{b, "alice", "hello bob"}, {a, "bob", "hello alice"}} {
		var got []string
		wait.For(t, e2eDeliverDeadline, x.p.name+"'s message from "+x.from, func() bool {
			var r checkResult
			x.p.mustCall("check_messages", map[string]any{}, &r)
			for _, m := range r.Messages {
				got = append(got, m.From+": "+m.Body)
			}
			return len(got) > 0
		})
		var again checkResult
		res := x.p.mustCall("check_messages", map[string]any{"limit": 10}, &again)
		for _, m := range again.Messages {
			got = append(got, m.From+": "+m.Body)
		}
		if want := []string{x.from + ": " + x.body}; !slices.Equal(got, want) {
			t.Errorf("%s read %q, want %q once", x.p.name, got, want)
		}
		if !strings.Contains(text(res), "No unread messages") {
			t.Errorf("%s's second check_messages: %q", x.p.name, text(res))
		}
	}
	a.close() // stdin closes: the server deregisters, then exits
	if ids := sessionIDs(t, c); len(ids) != 1 {
		t.Errorf("sessions after alice's client closed: %v, want bob's alone", ids)
	}
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wait.For(t, stopDeadline, "bob's server to exit after SIGTERM", func() bool { return processGone(b.cmd.Process.Pid) })
	if ids := sessionIDs(t, c); len(ids) != 0 {
		t.Errorf("sessions after SIGTERM to bob's server: %v", ids)
	}
	t.Log("checked: two MCP servers are two sessions; each reaches the other by display name and reads its message once; " +
		"each deregisters when its stdin closes or on SIGTERM")
}

// TestMCPNotification: a message that arrives while the client waits is
// pushed to it — a log notification, and the channel notification to a
// client that declared claude/channel — and, pushed to such a client,
// counts as read.
func TestMCPNotification(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	a := startMCP(t, e, "alice", mcpOptions{channel: true})
	b := startMCP(t, e, "bob", mcpOptions{})
	b.waitPeer("alice")
	b.mustCall("send_message", map[string]any{"to": "alice", "message": "are you there?", "client_message_id": "notify-1"}, nil)

	n := a.nextChannel()
	if n.Content != "are you there?" || n.Meta["from"] != "bob" || n.Meta["client_message_id"] != "notify-1" || n.Meta["message_id"] == "" {
		t.Errorf("channel notification %+v", n)
	}
	select {
	case l := <-a.logs:
		b, _ := json.Marshal(l.Data)
		if l.Level != "info" || !strings.Contains(string(b), "are you there?") || !strings.Contains(string(b), "bob") {
			t.Errorf("log notification %s %s", l.Level, b)
		}
	case <-time.After(mcpDeadline):
		t.Fatalf("no notifications/message; stderr:\n%s", a.stderr)
	}
	var r checkResult
	if res := a.mustCall("check_messages", map[string]any{}, &r); len(r.Messages) != 0 {
		t.Errorf("check_messages after the push returns it again: %s", text(res))
	}
	t.Log("checked: a message arriving while the client waits comes as a log and a channel notification, and then counts as read")
}

// TestMCPDaemonRestart: the daemon restarts while MCP servers run; a
// server resumes its event stream after the last event it saw, and a
// message sent after the restart is pushed exactly once (nor is the one
// before pushed again). A server that had seen no event yet (carol) has
// no id to resume from and catches up through the inbox instead.
func TestMCPDaemonRestart(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	d := startDaemon(t, e, "--no-tcp")
	a := startMCP(t, e, "alice", mcpOptions{channel: true})
	b := startMCP(t, e, "bob", mcpOptions{})
	carol := startMCP(t, e, "carol", mcpOptions{channel: true, lean: true})
	b.waitPeer("alice")
	b.mustCall("send_message", map[string]any{"to": "alice", "message": "before the restart", "client_message_id": "restart-0"}, nil)
	seen := []string{a.nextChannel().Content}

	d.stop()
	d2 := startDaemon(t, e, "--no-tcp")
	if d2.pid() == d.pid() {
		t.Fatal("the daemon did not restart")
	}
	b.sendUntilAccepted(map[string]any{"to": "alice", "message": "after the restart", "client_message_id": "restart-1"})
	b.sendUntilAccepted(map[string]any{"to": "alice", "message": "last", "client_message_id": "restart-2"})
	b.sendUntilAccepted(map[string]any{"to": "carol", "message": "for carol", "client_message_id": "restart-3"})
	b.sendUntilAccepted(map[string]any{"to": "carol", "message": "last", "client_message_id": "restart-4"})
	for seen[len(seen)-1] != "last" {
		seen = append(seen, a.nextChannel().Content)
	}
	if want := []string{"before the restart", "after the restart", "last"}; !slices.Equal(seen, want) {
		t.Fatalf("alice was pushed %q, want %q (each once)", seen, want)
	}
	var carols []string
	for len(carols) == 0 || carols[len(carols)-1] != "last" {
		carols = append(carols, carol.nextChannel().Content)
	}
	if want := []string{"for carol", "last"}; !slices.Equal(carols, want) {
		t.Fatalf("carol was pushed %q, want %q (each once)", carols, want)
	}
	t.Log("checked: across a daemon restart the MCP server's pushes resume with nothing lost or repeated")
}
