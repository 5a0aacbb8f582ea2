package integration

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// TestHeldMessageVisible: a direct message of the default priority to a
// session that is working — made so by Claude Code's UserPromptSubmit
// hook for an MCP server's session, or by POST /v1/profile — is held by
// the broker (no push until the turn ends) and yet read at once: the MCP
// server's check_messages and the session's GET /v1/inbox pull it as soon
// as the broker has it. The sender's answer says the recipient is working
// and that the message waits for its turn to end.
func TestHeldMessageVisible(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	const aliceSession = "held-alice"
	alice := startMCP(t, e, "alice", mcpOptions{env: []string{"CLAUDE_CODE_SESSION_ID=" + aliceSession}})
	carol := registerSession(t, e.socket(), "local", "held-carol", "carol")
	bob := registerSession(t, e.socket(), "local", "held-bob", "bob")
	alice.waitPeer("bob")
	runHook(t, e, hookBinPath, "UserPromptSubmit", hookInput(t, "UserPromptSubmit", aliceSession))
	working := messages.StatusWorking
	if _, err := carol.c.SetProfile(ctx, &messages.SetProfile{Status: &working}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, e2eConnectDeadline, "bob to see alice and carol working", func() bool {
		peers, err := bob.c.Peers(ctx, "")
		busy := 0
		for _, p := range peers {
			if (p.DisplayName == "alice" || p.DisplayName == "carol") && p.Status == messages.StatusWorking {
				busy++
			}
		}
		return err == nil && busy == 2
	})

	body := "a question during your turn"
	for _, to := range []struct{ to, id string }{{"alice", "held-to-alice"}, {carol.pubkey, "held-to-carol"}} {
		res, err := bob.c.Send(ctx, &messages.SendRequest{To: to.to, Message: &body, ClientMessageID: to.id}, "")
		if err != nil || res.Accepted == nil || res.Accepted.RecipientStatus != messages.StatusWorking || !res.Accepted.HeldUntilIdle {
			t.Fatalf("bob's send to %s: %+v, %v; want it accepted, the recipient working and the message held", to.to, res, err)
		}
		wait.For(t, e2eDeliverDeadline, "the broker to take "+to.id, func() bool {
			row, err := bob.c.OutboxRow(ctx, "local", to.id)
			return err == nil && row != nil && row.Status == "done"
		})
	}

	page, err := carol.c.Inbox(ctx, url.Values{"unread_only": {"true"}})
	if err != nil || !slices.ContainsFunc(page.Items, func(it messages.InboxItem) bool {
		return it.ClientMessageID == "held-to-carol" && it.SenderName == "bob" && messages.Deref(it.Body) == body
	}) {
		t.Errorf("carol's GET /v1/inbox right after the broker took bob's message: %+v, %v", page, err)
	}
	var r checkResult
	res := alice.mustCall("check_messages", map[string]any{}, &r)
	if len(r.Messages) != 1 || r.Messages[0].From != "bob" || r.Messages[0].Body != body {
		t.Errorf("alice's check_messages during her turn: %s", text(res))
	}

	// The sending agent is told too: alice sends to carol, still working.
	wait.For(t, e2eConnectDeadline, "alice to see carol working", func() bool {
		var p peersResult
		alice.mustCall("list_peers", map[string]any{}, &p)
		return slices.ContainsFunc(p.Peers, func(q struct {
			Name   string `json:"name"`
			Pubkey string `json:"pubkey"`
			Status string `json:"status"`
			You    bool   `json:"you"`
		}) bool {
			return q.Name == "carol" && q.Status == messages.StatusWorking
		})
	})
	var sent struct {
		RecipientStatus string `json:"recipient_status"`
		HeldUntilIdle   bool   `json:"held_until_idle"`
	}
	res = alice.mustCall("send_message", map[string]any{"to": "carol", "message": "when you are done"}, &sent)
	if sent.RecipientStatus != messages.StatusWorking || !sent.HeldUntilIdle || !strings.Contains(text(res), "waits until it is idle") {
		t.Errorf("alice's send to carol (working): %+v %q", sent, text(res))
	}
	t.Log("checked: a default-priority DM to a working session (hook or profile) is read at once by check_messages " +
		"and GET /v1/inbox; the sender is told the recipient is working and the message waits for its turn to end")
}

// TestHeldMessageNotPushedAgain: a channel client whose check_messages
// pulled a held message is not pushed that message after: the next push
// is of the next message.
func TestHeldMessageNotPushedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	const aliceSession = "held-push-alice"
	alice := startMCP(t, e, "alice", mcpOptions{channel: true, env: []string{"CLAUDE_CODE_SESSION_ID=" + aliceSession}})
	bob := registerSession(t, e.socket(), "local", "held-push-bob", "bob")
	alice.waitPeer("bob")
	runHook(t, e, hookBinPath, "UserPromptSubmit", hookInput(t, "UserPromptSubmit", aliceSession))
	wait.For(t, e2eConnectDeadline, "bob to see alice working", func() bool {
		peers, err := bob.c.Peers(ctx, "")
		return err == nil && slices.ContainsFunc(peers, func(p ipc.MeshPeer) bool {
			return p.DisplayName == "alice" && p.Status == messages.StatusWorking
		})
	})
	held, now := "held during the turn", "urgent"
	if _, err := bob.c.Send(ctx, &messages.SendRequest{To: "alice", Message: &held, ClientMessageID: "held-push-1"}, ""); err != nil {
		t.Fatal(err)
	}
	wait.For(t, e2eDeliverDeadline, "the broker to take held-push-1", func() bool {
		row, err := bob.c.OutboxRow(ctx, "local", "held-push-1")
		return err == nil && row != nil && row.Status == "done"
	})
	var r checkResult
	if res := alice.mustCall("check_messages", map[string]any{}, &r); len(r.Messages) != 1 || r.Messages[0].Body != held {
		t.Fatalf("check_messages during the turn: %s", text(res))
	}
	if _, err := bob.c.Send(ctx, &messages.SendRequest{To: "alice", Message: &now, ClientMessageID: "held-push-2", Priority: "now"}, ""); err != nil {
		t.Fatal(err)
	}
	if n := alice.nextChannel(); n.Content != now {
		t.Errorf("the first push after check_messages read the held message: %q, want %q", n.Content, now)
	}
}
