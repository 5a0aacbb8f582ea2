package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/cmd/internal/gctune"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// channelCapability is Claude Code's experimental capability for servers
// that push events into the session, and channelMethod its notification.
const (
	channelCapability = "claude/channel"
	channelMethod     = "notifications/claude/channel"
)

// mcpInstructions tell the agent what the server is for, naming every tool
// it registers (TestInstructionsNameEveryTool holds the two together).
const mcpInstructions = `claudemesh connects this session to a mesh of other agents (peers). ` +
	`Use list_peers to see who is online (whois for one peer's profile), send_message to message a peer by display name, a #topic, ` +
	`an @group or * (everyone), or a list of them, check_messages to read what peers sent you (fetch_inbox lists without marking ` +
	`read; mark_read marks), reply_message to answer a message in its thread, and set_status to tell peers whether you are idle, ` +
	`working or not to be disturbed (set_summary for what you are doing). health_check says whether messaging works. ` +
	`Messages that arrive while you work are pushed to you as they come. ` +
	`The mesh also shares topics (topic_list, topic_create, topic_join, topic_leave, topic_members, topic_history), ` +
	`small JSON state every agent can read and set ` +
	`(state_get, state_set with if_version for a safe update, state_list), a searchable memory (remember, recall, forget), ` +
	`skills, named instructions any agent can fetch (skill_list, skill_get, skill_publish), ` +
	`and locks: claim a file before editing it when other agents may edit it too (lock_acquire, lock_release, lock_list). ` +
	`Reserve the files you are about to edit by pattern so that no other agent edits them meanwhile (reserve_files, release_files, ` +
	`list_reservations; guard_install adds the commit guard that enforces them); start_session does it, and returns your unread ` +
	`messages, in one call: call it first. ` +
	`Messages may carry a subject, a thread, an importance and ask for an acknowledgement (send_message's fields): ` +
	`read a conversation with get_thread, search what you received with search_messages, acknowledge a message with ` +
	`acknowledge_message (list_unacknowledged lists those asking you; list_awaiting_acks yours still waiting), and choose who ` +
	`may message you directly (set_contact_policy; list_contacts and answer_contact_request for strangers' requests).`

// MCP is `claudemesh mcp`: the mesh the session joins ("": CLAUDEMESH_MESH,
// else the daemon's default, ChooseMesh), the display name peers see ("":
// CLAUDEMESH_DISPLAY_NAME, else <directory>-<4 hex>), the tools it serves
// ("": claudemesh's own), the server's version, and the claudemesh binary
// that starts the daemon when none answers and installs the commit guard
// ("": this one).
type MCP struct {
	Mesh, Name string
	Tools      ToolSet
	Version    string
	Claudemesh string
}

// Serve serves MCP on stdin/stdout until the client closes stdin or a
// signal ends it. Only the protocol goes to stdout; diagnostics go to
// stderr.
func (c *MCP) Serve(paths config.Paths) error {
	tools, err := ParseToolSet(string(c.Tools))
	if err != nil {
		return err
	}
	gctune.Set(mcpGCPercent, mcpGCMemoryLimit)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// The session is set up beside the protocol's handshake, not before
	// it; a tool call waits for the set-up to end (sessionLink.warm).
	link := &sessionLink{paths: paths, mesh: c.Mesh, name: c.Name, warm: make(chan struct{})}
	go func() {
		defer close(link.warm)
		if os.Getenv("GOMAXPROCS") == "" { // start-up uses every core; serving needs one (mcpProcs)
			defer runtime.GOMAXPROCS(mcpProcs)
		}
		if _, err := EnsureDaemon(ctx, paths, c.Claudemesh); err != nil {
			log.Warn("mcp_no_daemon", "err", err) // the tools say so until one answers
		} else if s, err := link.establishLocked(ctx); err != nil {
			log.Warn("mcp_session_unavailable", "err", err)
		} else {
			reg, pubkey := s.Info()
			log.Info("mcp_session", "mesh", reg.Mesh, "session_id", reg.SessionID, "display_name", reg.DisplayName,
				"session_pubkey", pubkey, "owned", s.owned)
		}
	}()
	m := newMCPServer(link, c.Version, tools, log)
	m.claudemesh = c.Claudemesh
	err = m.serve(ctx)
	<-link.warm // a session registered meanwhile is ended below
	if s := link.current(); s != nil {
		if derr := s.End(); derr != nil {
			log.Warn("mcp_deregister_failed", "err", derr)
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// Garbage collection of an MCP server, a process of its own per agent
// session whose live heap is a few megabytes, while each tool call
// allocates tens of kilobytes (its JSON, its IPC request). When every call
// went through the SDK, which decodes each JSON value through a decoder
// with a fresh 32 KiB buffer, the collector at Go's default percent ran
// every few dozen calls and took a third of the server's CPU
// (docs/BENCHMARKS.md, "Agent mail: messages"); tool calls now skip it
// (lineTransport), the rest of the protocol does not. At mcpGCPercent the
// heap may grow to three times what is live between collections: about 22
// MB resident under load against 18 (400 held 30 MB for no faster call),
// and mcpGCMemoryLimit bounds it whatever the percent allows.
const (
	mcpGCPercent     = 200
	mcpGCMemoryLimit = 64 << 20
)

// mcpProcs is an MCP server's GOMAXPROCS once its start-up is over (unless
// GOMAXPROCS says otherwise; the start-up — the SDK's schemas, the
// session's registration, the handshake — runs on every core, and the
// first tool answer comes as soon as before). An agent's calls mostly wait
// on the daemon (those it makes at once still run side by side, as
// goroutines), so one thread runs all a server needs; with a P per core,
// every server of a machine's sessions kept threads spinning for work and
// waking each other across cores: 16 servers sending at once spent a fifth
// of their CPU in the scheduler, and with one P each the same run sends
// 20–25 % more messages a second, the one-call latency unchanged within
// the noise (docs/BENCHMARKS.md, "Agent mail: messages"). One P holds only
// with stdin and stdout read and written through the poller
// (stdioTransport).
const mcpProcs = 1

// sessionLink is the MCP server's session, established on first use: at
// start when the daemon answers, else at the first tool call after it does.
type sessionLink struct {
	paths      config.Paths
	mesh, name string
	// warm is closed when the attempt at start has ended (a daemon
	// started if none answered, the session established if it could be).
	warm chan struct{}

	mu   sync.Mutex
	sess *Session
}

// get returns the session, attaching to the one the environment names or
// registering one, and checking it with the daemon when in doubt. It
// waits for the attempt at start first.
func (l *sessionLink) get(ctx context.Context) (*Session, error) {
	select {
	case <-l.warm:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	l.mu.Lock()
	s := l.sess
	l.mu.Unlock()
	if s != nil {
		return s, s.ensure(ctx)
	}
	return l.establishLocked(ctx)
}

// establishLocked establishes the session under mu unless one is.
func (l *sessionLink) establishLocked(ctx context.Context) (*Session, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess != nil {
		return l.sess, nil
	}
	s, err := l.establish(ctx)
	if err != nil {
		return nil, err
	}
	l.sess = s
	return s, nil
}

// current is the session if one was established.
func (l *sessionLink) current() *Session {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sess
}

func (l *sessionLink) establish(ctx context.Context) (*Session, error) {
	daemon := ipc.NewClient(l.paths.Socket())
	tok, err := SessionToken()
	if err != nil {
		return nil, err
	}
	if tok != "" {
		if s, err := attach(ctx, daemon, tok); s != nil || err != nil {
			return s, err
		}
	}
	vctx, cancel := context.WithTimeout(ctx, sessionRequestTimeout)
	v, err := daemon.Version(vctx)
	cancel()
	if err != nil {
		return nil, err
	}
	mesh, err := ChooseMesh(l.mesh, v)
	if err != nil {
		return nil, err
	}
	reg, err := NewRegistration(tok, mesh, l.name, true)
	if err != nil {
		return nil, err
	}
	if id := os.Getenv(envClaudeSessionID); os.Getenv(config.EnvSessionID) == "" && messages.ValidSessionID(id) {
		reg.SessionID = id // the id Claude Code's hooks report (hook.go): their events are this session's
	}
	return Register(ctx, daemon, reg)
}

// mcpServer is the MCP side: the SDK's server, the tools, and the pushes
// of arriving messages.
type mcpServer struct {
	link   *sessionLink
	log    *slog.Logger
	srv    *mcp.Server
	tools  *toolSet // srv's tools, whose calls the transport serves (directCalls)
	out    *rawTransport
	peers  peerCache     // send_message's peer list
	topics topicNames    // the names of live topic messages' topics
	subs   subscriptions // the resources the client subscribed to
	shown  shownSet      // the messages a tool's result showed, which no push repeats
	pushed shownSet      // the messages pushed to a channel client, which check_messages does not return again
	// claudemesh is the binary guard_install runs ("": this one).
	claudemesh string

	readyOnce sync.Once
	ready     chan struct{} // closed once the client has initialised
	mu        sync.Mutex
	ss        *mcp.ServerSession
}

// newMCPServer is the server of the tool set set (toolSetTable).
func newMCPServer(link *sessionLink, version string, set ToolSet, log *slog.Logger) *mcpServer {
	m := &mcpServer{link: link, log: log, ready: make(chan struct{})}
	tools := toolSetTable[set]
	m.srv = mcp.NewServer(&mcp.Implementation{Name: "claudemesh", Title: "claudemesh", Version: version}, &mcp.ServerOptions{
		Instructions: tools.instructions,
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Capabilities: &mcp.ServerCapabilities{
			//lint:ignore SA1019 logging notifications stay until every client reads channels; the protocol keeps them through 2027
			Logging:      &mcp.LoggingCapabilities{},
			Experimental: map[string]any{channelCapability: map[string]any{}},
		},
		SubscribeHandler:   m.subscribe,
		UnsubscribeHandler: m.unsubscribe,
	})
	m.tools = &toolSet{srv: m.srv, handlers: map[string]mcp.ToolHandler{}}
	tools.add(m)
	m.addResources() // resources.go
	m.srv.AddReceivingMiddleware(m.noteReady)
	m.out = &rawTransport{inner: stdioTransport(newDirectCalls(m.tools.handlers, m.protocolVersion))}
	return m
}

// protocolVersion is the protocol version the client asked for in its
// handshake ("" before it).
func (m *mcpServer) protocolVersion() string {
	if ss := m.session(); ss != nil {
		if p := ss.InitializeParams(); p != nil {
			return p.ProtocolVersion
		}
	}
	return ""
}

// noteReady marks the client ready for pushes once its session is
// initialised (after notifications/initialized, or at the first request
// of a client on the sessionless protocol).
func (m *mcpServer) noteReady(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok && method != "initialize" && ss.InitializeParams() != nil {
			m.readyOnce.Do(func() {
				m.mu.Lock()
				m.ss = ss
				m.mu.Unlock()
				close(m.ready)
			})
		}
		return res, err
	}
}

// session is the client's session, nil before it is ready.
func (m *mcpServer) session() *mcp.ServerSession {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ss
}

// serve runs the protocol on stdio, and the message pump beside it, until
// the client goes away or ctx ends.
func (m *mcpServer) serve(ctx context.Context) error {
	ss, err := m.srv.Connect(ctx, m.out, nil)
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	pctx, stopPump := context.WithCancel(ctx)
	pumpDone := make(chan struct{})
	go func() {
		defer close(pumpDone)
		(&messagePump{link: m.link, deliver: m.deliver, notice: m.notice, changed: m.changed, log: m.log}).run(pctx, m.ready)
	}()
	closed := make(chan error, 1)
	go func() { closed <- ss.Wait() }()
	select {
	case <-ctx.Done():
		ss.Close()
		err = <-closed
	case err = <-closed:
	}
	stopPump()
	<-pumpDone
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

// rawTransport is the stdio transport with a way to send notifications the
// SDK has no method for (Claude Code's channel notification).
type rawTransport struct {
	inner mcp.Transport
	mu    sync.Mutex
	conn  mcp.Connection
}

func (t *rawTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	t.mu.Lock()
	t.conn = c
	t.mu.Unlock()
	return c, err
}

// notify writes a JSON-RPC notification (the connection serialises
// writes).
func (t *rawTransport) notify(ctx context.Context, method string, params any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	if c == nil {
		return errors.New("mcp: not connected")
	}
	return c.Write(ctx, &jsonrpc.Request{Method: method, Params: raw})
}
