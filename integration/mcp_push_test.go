package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// TestMCPPushLostStaysUnread: a channel notification that could not be
// written — the client is gone, its end of the server's stdout closed —
// leaves the message unread, and the next server of the same session (a
// client that reconnects under Claude Code's session id) shows it: a
// message counts as read only once its push was written.
func TestMCPPushLostStaysUnread(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	session := "CLAUDE_CODE_SESSION_ID=" + ulid.Make().String()
	bob := startMCP(t, e, "bob", mcpOptions{})

	alice := exec.Command(mcpBinPath, "--name", "alice")
	alice.Env = append(e.environ(), session)
	stderr := &syncBuffer{}
	alice.Stderr = stderr
	in, err := alice.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := alice.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = alice.Wait(); close(exited) }()
	t.Cleanup(func() { in.Close(); <-exited })
	// The handshake of a client that takes channels, then the client goes
	// away without closing its input: its read end of stdout closes.
	fmt.Fprintln(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",`+
		`"capabilities":{"experimental":{"claude/channel":{}}},"clientInfo":{"name":"gone","version":"1"}}}`)
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("initialize: %v; stderr:\n%s", err, stderr)
	}
	fmt.Fprintln(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	bob.waitPeer("alice")
	out.(*os.File).Close()

	bob.mustCall("send_message", map[string]any{"to": "alice", "message": "did you get this?", "client_message_id": "lost-1"}, nil)
	wait.For(t, e2eDeliverDeadline, "alice's server to fail writing the push", func() bool {
		return strings.Contains(stderr.String(), "mcp_channel_notification_failed")
	})
	in.Close()
	<-exited

	again := startMCP(t, e, "alice", mcpOptions{lean: true, env: []string{session}})
	var r checkResult
	again.mustCall("check_messages", map[string]any{}, &r)
	if len(r.Messages) != 1 || r.Messages[0].Body != "did you get this?" {
		t.Fatalf("the reconnected session's check_messages: %+v, want the message whose push was lost", r.Messages)
	}
	t.Log("checked: a push the server could not write leaves its message unread, and the session's next server shows it")
}

// TestMCPResources: a client that takes neither channel notifications nor
// logs reads the session's inbox, a thread and the peers as resources, and
// is told of a message by notifications/resources/updated on the inbox
// and on the message's thread, the ones it subscribed to; reading the
// inbox leaves the message unread.
func TestMCPResources(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	a := startMCP(t, e, "alice", mcpOptions{})
	b := startMCP(t, e, "bob", mcpOptions{lean: true})
	b.waitPeer("alice")

	ctx, cancel := context.WithTimeout(context.Background(), mcpDeadline)
	defer cancel()
	list, err := a.cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range list.Resources {
		uris = append(uris, r.URI)
	}
	if want := []string{"inbox://messages", "inbox://peers", "inbox://reservations"}; !slices.Equal(uris, want) {
		t.Errorf("resources/list: %v, want %v", uris, want)
	}
	for _, uri := range []string{"inbox://messages", "inbox://threads/deploy-1"} {
		if err := a.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe %s: %v", uri, err)
		}
	}
	b.mustCall("send_message", map[string]any{"to": "alice", "message": "deploy is green", "thread_id": "deploy-1"}, nil)
	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case uri := <-a.updated:
			got[uri] = true
		case <-time.After(mcpDeadline):
			t.Fatalf("resource updates %v, want the inbox's and the thread's; stderr:\n%s", got, a.stderr)
		}
	}
	if !got["inbox://messages"] || !got["inbox://threads/deploy-1"] {
		t.Errorf("resource updates for %v", got)
	}
	var inbox checkResult
	readJSON(t, a, "inbox://messages", &inbox)
	if len(inbox.Messages) != 1 || inbox.Messages[0].Body != "deploy is green" || inbox.Messages[0].From != "bob" {
		t.Errorf("inbox://messages: %+v", inbox)
	}
	var thread struct {
		Received []struct {
			Body string `json:"body"`
		} `json:"received"`
	}
	readJSON(t, a, "resource://thread/deploy-1", &thread)
	if len(thread.Received) != 1 || thread.Received[0].Body != "deploy is green" {
		t.Errorf("resource://thread/deploy-1: %+v", thread)
	}
	// The daemon's own member is the machine, not a peer.
	var peers struct {
		Peers []struct {
			Name string `json:"name"`
		} `json:"peers"`
		Machines []struct {
			Name        string `json:"name"`
			ThisMachine bool   `json:"this_machine"`
		} `json:"machines"`
	}
	readJSON(t, a, "inbox://peers", &peers)
	var names []string
	for _, p := range peers.Peers {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"alice", "bob"}) || len(peers.Machines) != 1 || !peers.Machines[0].ThisMachine {
		t.Errorf("inbox://peers: peers %v, machines %+v; want alice and bob, and this machine apart", names, peers.Machines)
	}
	var r checkResult
	a.mustCall("check_messages", map[string]any{}, &r)
	if len(r.Messages) != 1 {
		t.Errorf("check_messages after reading the inbox resource: %+v, want the message still unread", r.Messages)
	}
	t.Log("checked: the inbox, a thread and the peers as resources; a message updates the subscribed inbox and thread; reading the inbox marks nothing read; the peers list the machine's daemon apart")
}

// readJSON reads the resource uri and decodes its JSON text into out.
func readJSON(t *testing.T, p *mcpProc, uri string, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mcpDeadline)
	defer cancel()
	res, err := p.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("resources/read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 || res.Contents[0].MIMEType != "application/json" {
		t.Fatalf("resources/read %s: %+v", uri, res.Contents)
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), out); err != nil {
		t.Fatalf("resources/read %s: %v: %s", uri, err, res.Contents[0].Text)
	}
}
