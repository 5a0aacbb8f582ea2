package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

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
