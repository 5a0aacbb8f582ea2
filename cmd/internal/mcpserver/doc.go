// Package mcpserver is claudemesh's MCP server, the agents' front door:
// `claudemesh mcp` and claudemesh-mcp run it, one process per agent
// session on the agent's stdin and stdout, to serve the mesh's tools and
// push the messages that arrive. It is a client of the daemon and nothing
// more: every tool is one or a few requests to the daemon's local API
// through transport/ipc. It must never link the daemon's side (actors,
// SQLite, the broker connection): an agent waits for its start-up.
//
// It also holds the agent session the server is built on, which
// claudemesh's launch, send, lock, reserve, sessions, outbox list and
// guard check commands use too: registering a session (Register,
// NewRegistration, ChooseMesh, Session), the token that names it
// (SessionToken, SessionSource, InsideSession, EnvTokenFile), starting
// the daemon when none answers (EnsureDaemon) and a repository's id for
// locks and reservations (RepoID). They stay here rather than in a
// package of their own because the server is their main user and the one
// that reaches into the session (the client that calls as it, whether it
// is in doubt); the commands only register one or read its token.
//
// # A tool call
//
//  1. The client (Claude Code) writes one JSON-RPC line on the server's
//     stdin, which is read through Go's poller (stdio.go).
//  2. lineTransport (conn.go) reads it. A plain tools/call of an
//     initialised session is served there by directCalls, with the
//     handler toolSet kept for the tool; everything else — the
//     handshake, tools/list, pings, batches — goes to the go-sdk's
//     mcp.Server, which calls the same handler for a tools/call. Both
//     paths answer in the same bytes (TestDirectCalls).
//  3. The handler is the one addTool (addtool.go) wraps around the tool's
//     method: it validates the arguments against the tool's input schema,
//     decodes them into the tool's In type and calls the method
//     (sendMessage in tools.go, topicJoin in topics.go …).
//  4. The method takes the session (m.link.get) and asks the daemon
//     through the IPC client that calls as the session (Session.as, a
//     transport/ipc Client): a send is POST /v1/send.
//  5. The daemon's IPC server (transport/ipcserver, its one route table
//     in routes.go) decodes and validates the request, asks one actor —
//     the accept router for a send, which answers once the store has
//     committed it; the mesh's broker connection for topics, state,
//     memory, locks, reservations — and renders the reply as JSON, or an
//     error envelope (messages.Error).
//  6. The method turns the reply into the tool's result: its Out value,
//     which addTool marshals into structuredContent (and into a text
//     block, unless the method gave its own text: textResult); or an
//     error, which addTool turns into a result with isError set for the
//     agent to read. toolError (errors.go) words a refusal or absence of
//     the daemon as what happened and what to do next. Only a
//     *jsonrpc.Error becomes a protocol error.
//
// # The session
//
// The server's session at the daemon is its sessionLink's (server.go).
// At start, beside the protocol's handshake, it starts the daemon if none
// answers (EnsureDaemon), then attaches to the session `claudemesh
// launch` registered (the token in CLAUDEMESH_IPC_TOKEN_FILE) or
// registers one of its own (under Claude Code's CLAUDE_CODE_SESSION_ID,
// so that the hooks' events are the same peer's). A tool call waits for
// that attempt, then takes the session, establishing it if the attempt
// failed. A daemon that did not answer, or an event stream that ended,
// puts the session in doubt (Session.doubt): its next use checks that
// the daemon still knows it, and registers it again if not. A session
// the server registered itself is deregistered when it ends.
//
// # Pushed messages
//
// Once the client has initialised, messagePump (events.go) follows the
// session's event stream (GET /v1/events: server-sent events, fed by the
// daemon's events actor). A message event goes to deliver, which tells
// the client in a logging notification, by notifications/resources/updated
// for the resources it subscribed to (resources.go: the inbox, the
// message's thread) and, if the client takes them (Claude Code, or a
// client declaring the claude/channel capability), in a
// notifications/claude/channel notification, written on stdout by
// rawTransport since the SDK has no method for it; a message so pushed to
// a client that declared the capability is marked read once the write
// returned, never before. Receipts and contact requests go to notice,
// which tells them by log and channel; peers joining or leaving, and
// reservations lost, update their resources. When the stream ends the
// pump resumes after the last event id it saw, or, having seen none,
// catches up on the session's unread messages through the inbox (at
// start: what the session missed while no server of it ran), so that each
// message is shown once.
//
// # Adding a tool
//
//  1. The daemon's side, if no route does what the tool needs: the
//     request and reply types in messages/, the route and its handler in
//     transport/ipcserver, the client's method in transport/ipc.
//  2. The tool's In and Out types, in its feature's file (topics.go,
//     locks.go …; a new feature gets a file of its own): structs of plain
//     fields, whose jsonschema tags are what the agent reads about each.
//  3. Its method, func (m *mcpServer) x(ctx, *mcp.CallToolRequest, In)
//     (*mcp.CallToolResult, *Out, error): m.link.get, the request through
//     s.as(), a failure through m.toolError (or the feature's own
//     wording, such as lockError). directCalls calls it with no SDK
//     session, so it must not notify the client mid-call.
//  4. Its registration, addTool(m.tools, &mcp.Tool{Name, Title,
//     Description, InputSchema: schemaOf[In](…)}, m.x), in the feature's
//     addXTools, which addTools (tools.go) calls. Always through m.tools,
//     never m.srv: toolSet keeps the handler for directCalls.
//  5. Its name in mcpInstructions (server.go), where the agent learns
//     what the server offers: TestInstructionsNameEveryTool fails until
//     it is there; and its behaviour hints in toolAnnotations
//     (annotations.go): TestToolsDescribed fails until they are there,
//     and on a property without a description. A tool of the Agent Mail
//     set (`--tools agent-mail`, toolsets.go: Agent Mail's names and
//     argument shapes mapped onto these tools, in agentmail*.go) is named
//     in agentMailInstructions, and one whose name only that set has
//     carries its hints itself.
//  6. Its test in integration/mcp_<feature>_test.go, which calls it
//     through the built binary against a real daemon (and broker);
//     TestMCPTools checks that it and its arguments are described. Its
//     entry in TOOLS (integration/mcp-client/mcp.test.mjs), the
//     arguments the TypeScript SDK's client calls it with (AGENT_MAIL_TOOLS
//     for the Agent Mail set's): that test fails on a tool without one.
//     The tool table in docs/AGENTS.md lists it.
package mcpserver
