package integration

import (
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// TestMCPTopics: the topic tools of `claudemesh mcp`, through the real MCP
// client, as agent sessions on the embedded broker: alice creates a topic,
// bob finds it, bob and carol join it, alice's #name message reaches them
// and shows in the history; the members are the sessions, by name; alice's
// leave is hers alone; an unknown topic is a tool error that says what to
// do.
func TestMCPTopics(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	a := startMCP(t, e, "alice", mcpOptions{})
	b := startMCP(t, e, "bob", mcpOptions{})
	c := startMCP(t, e, "carol", mcpOptions{channel: true}) // takes pushes: what reaches her is read at once
	a.waitPeer("bob")

	var created struct {
		Topic struct {
			Name, ID string
		} `json:"topic"`
		Created bool `json:"created"`
	}
	a.mustCall("topic_create", map[string]any{"name": "design", "description": "the UI"}, &created)
	if !created.Created || created.Topic.Name != "design" || len(created.Topic.ID) != 32 {
		t.Fatalf("topic_create: %+v", created)
	}
	if res := a.call("topic_join", map[string]any{"topic": "nope"}); !res.IsError || !strings.Contains(text(res), "topic_list") {
		t.Errorf("topic_join nope: error %v, %q; want a tool error that points to topic_list", res.IsError, text(res))
	}
	if res := a.call("topic_create", map[string]any{"name": "two words"}); !res.IsError || !strings.Contains(text(res), "name") {
		t.Errorf("topic_create with a space: error %v, %q", res.IsError, text(res))
	}
	var list struct {
		Topics []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			Members     int    `json:"members"`
		} `json:"topics"`
	}
	b.mustCall("topic_list", map[string]any{}, &list)
	if len(list.Topics) != 1 || list.Topics[0].Name != "design" || list.Topics[0].Description != "the UI" || list.Topics[0].Members != 1 {
		t.Fatalf("topic_list: %+v", list)
	}
	var members struct {
		Members []struct{ Name, Role string } `json:"members"`
	}
	b.mustCall("topic_join", map[string]any{"topic": "#design"}, &members)
	c.mustCall("topic_join", map[string]any{"topic": "design"}, &members)

	var sent sendResult
	a.mustCall("send_message", map[string]any{"to": "#design", "message": "new mockups", "client_message_id": "mcp-topic-1"}, &sent)
	// Pushed as it arrives, it names the topic as the agent does.
	if n := c.nextChannel(); n.Meta["topic"] != "#design" || !strings.Contains(n.Content, "new mockups") {
		t.Errorf("carol's channel notification: %+v; want it to #design", n)
	}
	wait.For(t, e2eDeliverDeadline, "bob's #design message", func() bool {
		var r struct {
			Messages []struct {
				Body, Kind, Topic string
				TopicName         string `json:"topic_name"`
			} `json:"messages"`
		}
		res := b.mustCall("check_messages", map[string]any{}, &r)
		for _, m := range r.Messages {
			if m.Body == "new mockups" && m.Kind == "topic" && m.Topic == created.Topic.ID {
				if m.TopicName != "design" || !strings.Contains(text(res), "to #design") {
					t.Fatalf("check_messages shows the topic as %q: %s", m.TopicName, text(res))
				}
				return true
			}
		}
		return false
	})
	var history struct {
		Messages []struct {
			Body string `json:"body"`
			From string `json:"from"`
		} `json:"messages"`
	}
	if res := b.mustCall("topic_history", map[string]any{"topic": "#design", "limit": 5}, &history); len(history.Messages) != 1 ||
		history.Messages[0].Body != "new mockups" || !strings.Contains(text(res), "new mockups") {
		t.Errorf("topic_history: %+v, %q", history, text(res))
	}
	b.mustCall("topic_members", map[string]any{"topic": "design"}, &members)
	if len(members.Members) != 3 || members.Members[0].Name != "alice" || members.Members[0].Role != "lead" ||
		members.Members[1].Name != "bob" || members.Members[2].Name != "carol" {
		t.Errorf("topic_members: %+v; want alice (lead), bob and carol", members)
	}
	a.mustCall("topic_leave", map[string]any{"topic": "design"}, &members)
	if len(members.Members) != 2 || members.Members[0].Name != "bob" || members.Members[1].Name != "carol" {
		t.Errorf("topic_leave: %+v; want bob and carol left in it", members)
	}
}
