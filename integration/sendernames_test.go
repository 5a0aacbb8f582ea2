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

// TestDrainedSenderName: a session's DM to a session whose daemon is down
// is drained to it when its daemon comes back, after the sender's session
// has ended, and is still named by the sender's session name — on a broker
// on SQLite (which keeps no session rows) and on PostgreSQL.
func TestDrainedSenderName(t *testing.T) {
	for backend, newMesh := range map[string]func(*testing.T) *e2eMesh{"sqlite": newE2EMesh, "postgres": newE2EMeshOnPostgres} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			m := newMesh(t)
			m.alice.start(t)
			m.bob.start(t)
			ant := registerSession(t, m.alice.env.socket(), "demo", "sess-ant", "ant")
			cat := registerSession(t, m.bob.env.socket(), "demo", "sess-cat", "cat")
			wait.For(t, e2eConnectDeadline, "ant to see cat", func() bool {
				peers, err := ant.c.Peers(ctx, "")
				return err == nil && slices.ContainsFunc(peers, func(p ipc.MeshPeer) bool { return p.DisplayName == "cat" })
			})

			m.bob.d.stop()
			body := "while you were away"
			res, err := ant.c.Send(ctx, &messages.SendRequest{To: cat.pubkey, Message: &body, ClientMessageID: "named-1"}, "")
			if err != nil || res.Accepted == nil {
				t.Fatalf("ant's send: %+v %v", res, err)
			}
			wait.For(t, e2eDeliverDeadline, "the broker to take ant's message", func() bool {
				row, err := ant.c.OutboxRow(ctx, "demo", "named-1")
				return err == nil && row != nil && row.Status == "done"
			})
			if _, err := ipc.NewClient(m.alice.env.socket()).DeregisterSession(ctx, ant.token); err != nil {
				t.Fatal(err)
			}

			m.bob.start(t)
			var got []messages.InboxItem
			wait.For(t, e2eDeliverDeadline, "cat's message from ant", func() bool {
				page, err := cat.c.Inbox(ctx, url.Values{"mark_seen": {"false"}})
				if err == nil {
					got = page.Items
				}
				return len(got) > 0
			})
			if len(got) != 1 || got[0].ClientMessageID != "named-1" || got[0].SenderName != "ant" {
				t.Errorf("cat's inbox after its daemon came back: %+v, want named-1 from ant", got)
			}
		})
	}
}

// TestMCPTopicHistoryNames: topic_history names a session's messages by
// the session's display name, beside its key, on the embedded broker
// (SQLite), where the name once came out as the bare key.
func TestMCPTopicHistoryNames(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	a := startMCP(t, e, "alice", mcpOptions{})
	b := startMCP(t, e, "bob", mcpOptions{})
	a.waitPeer("bob")
	var me peersResult
	a.mustCall("list_peers", map[string]any{}, &me)
	a.mustCall("topic_create", map[string]any{"name": "names"}, nil)
	b.mustCall("topic_join", map[string]any{"topic": "names"}, nil)
	a.mustCall("send_message", map[string]any{"to": "#names", "message": "named?", "client_message_id": "named-topic-1"}, nil)
	var history struct {
		Messages []struct {
			From       string `json:"from"`
			FromPubkey string `json:"from_pubkey"`
			Body       string `json:"body"`
		} `json:"messages"`
	}
	wait.For(t, e2eDeliverDeadline, "the message in #names' history", func() bool {
		b.mustCall("topic_history", map[string]any{"topic": "#names"}, &history)
		return len(history.Messages) > 0
	})
	res := b.mustCall("topic_history", map[string]any{"topic": "#names"}, &history)
	var alice string
	for _, p := range me.Peers {
		if p.You {
			alice = p.Pubkey
		}
	}
	if len(history.Messages) != 1 || history.Messages[0].From != "alice" || history.Messages[0].FromPubkey != alice ||
		!strings.Contains(text(res), "alice ("+alice[:16]) {
		t.Errorf("topic_history: %+v %q; want named? from alice (%.16s…)", history, text(res), alice)
	}
}
