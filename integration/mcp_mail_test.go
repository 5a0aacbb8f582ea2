package integration

import (
	"encoding/json"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// mailMessage is a message as the MCP mail tools return it.
type mailMessage struct {
	ID              string `json:"id"`
	From            string `json:"from"`
	Body            string `json:"body"`
	Subject         string `json:"subject"`
	ThreadID        string `json:"thread_id"`
	Importance      string `json:"importance"`
	AckRequired     bool   `json:"ack_required"`
	Acked           bool   `json:"acked"`
	ClientMessageID string `json:"client_message_id"`
}

type mailList struct {
	Messages []mailMessage `json:"messages"`
}

// TestMCPMail: the mail tools through `claudemesh mcp` as two agent
// sessions: alice sends bob a subject, an importance and a request for an
// acknowledgement; bob's check_messages shows them and list_unacknowledged
// lists it; bob answers in the thread and acknowledges; alice's
// list_awaiting_acks empties, her get_thread shows both sides in order,
// naming bob, and
// search_messages finds bob's answer. Bob's contacts_only policy holds a
// stranger's message as a contact request, which he accepts. Bad arguments
// are tool errors that change nothing.
func TestMCPMail(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	a := startMCP(t, e, "alice", mcpOptions{})
	b := startMCP(t, e, "bob", mcpOptions{lean: true})
	a.waitPeer("bob")
	b.waitPeer("alice")

	var sent sendResult
	a.mustCall("send_message", map[string]any{"to": "bob", "message": "please review the deploy script",
		"subject": "review: deploy.sh", "importance": "high", "ack_required": true}, &sent)
	root := sent.ClientMessageID
	var got checkResultMail
	wait.For(t, e2eDeliverDeadline, "bob's message", func() bool {
		got = checkResultMail{}
		res := b.call("check_messages", map[string]any{})
		decode(t, res, &got)
		return len(got.Messages) == 1
	})
	m := got.Messages[0]
	if m.Subject != "review: deploy.sh" || m.Importance != "high" || !m.AckRequired || m.Acked || m.ClientMessageID != root {
		t.Fatalf("bob's message: %+v", m)
	}
	var unacked mailList
	b.mustCall("list_unacknowledged", map[string]any{}, &unacked)
	if len(unacked.Messages) != 1 || unacked.Messages[0].ID != m.ID {
		t.Fatalf("list_unacknowledged: %+v", unacked)
	}
	var awaiting struct {
		Messages []struct {
			ClientMessageID string   `json:"client_message_id"`
			AckedBy         []string `json:"acked_by"`
		} `json:"messages"`
	}
	a.mustCall("list_awaiting_acks", map[string]any{}, &awaiting)
	if len(awaiting.Messages) != 1 || awaiting.Messages[0].ClientMessageID != root {
		t.Fatalf("alice's list_awaiting_acks before: %+v", awaiting)
	}

	b.mustCall("send_message", map[string]any{"to": "alice", "message": "looks good, one nit about retries", "reply_to_id": m.ID}, &sent)
	var ack struct {
		Receipt string `json:"receipt"`
	}
	b.mustCall("acknowledge_message", map[string]any{"id": m.ID}, &ack)
	if ack.Receipt == "" || ack.Receipt == "duplicate" {
		t.Fatalf("acknowledge_message: %+v", ack)
	}
	if res := b.mustCall("acknowledge_message", map[string]any{"id": m.ID}, &ack); ack.Receipt != "duplicate" ||
		!strings.Contains(text(res), "already acknowledged") {
		t.Fatalf("acknowledge_message again: %+v %q", ack, text(res))
	}
	wait.For(t, e2eDeliverDeadline, "alice's acknowledgement", func() bool {
		awaiting.Messages = nil
		a.mustCall("list_awaiting_acks", map[string]any{}, &awaiting)
		return len(awaiting.Messages) == 0
	})
	var thread struct {
		Received []mailMessage `json:"received"`
		Sent     []struct {
			ClientMessageID string   `json:"client_message_id"`
			ToName          string   `json:"to_name"`
			AckedBy         []string `json:"acked_by"`
			Body            string   `json:"body"`
		} `json:"sent"`
	}
	res := a.mustCall("get_thread", map[string]any{"thread_id": root}, &thread)
	if len(thread.Received) != 1 || thread.Received[0].ThreadID != root || len(thread.Sent) != 1 ||
		thread.Sent[0].ToName != "bob" || len(thread.Sent[0].AckedBy) != 1 || thread.Sent[0].AckedBy[0] != "bob" ||
		thread.Sent[0].Body != "please review the deploy script" {
		t.Fatalf("alice's get_thread: %+v", thread)
	}
	// The conversation reads in order: alice's message to bob, with its
	// text (sealed to bob, opened with alice's key), then his answer.
	if asked, answered := strings.Index(text(res), "You sent "+root+" to bob ("), strings.Index(text(res), "one nit about retries"); asked < 0 ||
		answered < asked || !strings.Contains(text(res)[asked:answered], ":\nplease review the deploy script") {
		t.Fatalf("alice's get_thread, not oldest first or not naming bob:\n%s", text(res))
	}
	if res := a.mustCall("get_thread", map[string]any{"thread_id": "no-such-thread"}, nil); !strings.HasPrefix(text(res), "No message in thread no-such-thread:") {
		t.Errorf("get_thread of no thread: %q", text(res))
	}
	var found mailList
	a.mustCall("search_messages", map[string]any{"query": "retries nit"}, &found)
	if len(found.Messages) != 1 || !strings.Contains(found.Messages[0].Body, "retries") {
		t.Fatalf("search_messages: %+v", found)
	}

	if res := b.mustCall("set_contact_policy", map[string]any{"policy": "contacts_only"}, nil); !strings.Contains(text(res), "contact requests wait 7 days") {
		t.Fatalf("set_contact_policy: %q", text(res))
	}
	c := startMCP(t, e, "carol", mcpOptions{lean: true})
	c.waitPeer("bob")
	c.mustCall("send_message", map[string]any{"to": "bob", "message": "hello, I am new here"}, &sent)
	var held struct {
		Sent []struct {
			Refused []string `json:"refused"`
		} `json:"sent"`
	}
	wait.For(t, e2eDeliverDeadline, "carol's get_thread to say bob holds her message", func() bool {
		res := c.mustCall("get_thread", map[string]any{"thread_id": sent.ClientMessageID}, &held)
		return len(held.Sent) == 1 && len(held.Sent[0].Refused) == 1 &&
			strings.HasPrefix(held.Sent[0].Refused[0], "held by bob as a contact request until 20") &&
			strings.Contains(text(res), "; held by bob as a contact request until 20")
	})
	var contacts struct {
		Policy   string `json:"policy"`
		Contacts []struct {
			Name string `json:"name"`
			Via  string `json:"via"`
		} `json:"contacts"`
		Requests []struct {
			Name     string        `json:"name"`
			Messages []mailMessage `json:"messages"`
		} `json:"requests"`
	}
	wait.For(t, e2eDeliverDeadline, "carol's contact request", func() bool {
		contacts.Requests = nil
		b.mustCall("list_contacts", map[string]any{}, &contacts)
		return len(contacts.Requests) == 1
	})
	// Alice is bob's contact since he answered her (to her key, as
	// send_message resolves a name): named as the peer list names her.
	if contacts.Policy != "contacts_only" || contacts.Requests[0].Name != "carol" || len(contacts.Contacts) != 1 ||
		contacts.Contacts[0].Name != "alice" || contacts.Contacts[0].Via != "sent" {
		t.Fatalf("bob's list_contacts: %+v", contacts)
	}
	b.mustCall("answer_contact_request", map[string]any{"peer": "carol", "accept": true}, nil)
	got = checkResultMail{}
	decode(t, b.mustCall("check_messages", map[string]any{}, nil), &got)
	if len(got.Messages) != 1 || got.Messages[0].Body != "hello, I am new here" {
		t.Fatalf("bob's messages after accepting carol: %+v", got)
	}

	for _, c := range []struct {
		tool string
		args map[string]any
		says string // the tool the error points to, if any
	}{
		{"send_message", map[string]any{"to": "alice", "message": "x", "importance": "loud"}, ""},
		{"send_message", map[string]any{"to": "alice", "message": "x", "subject": strings.Repeat("s", 201)}, ""},
		{"acknowledge_message", map[string]any{"id": "no-such-message"}, "check_messages"},
		{"search_messages", map[string]any{"query": "!!"}, ""},
		{"get_thread", map[string]any{"thread_id": "has space"}, ""},
		{"set_contact_policy", map[string]any{"policy": "closed"}, ""},
		{"answer_contact_request", map[string]any{"peer": "nobody", "accept": true}, "list_contacts"},
	} {
		if res := b.call(c.tool, c.args); !res.IsError || !strings.Contains(text(res), c.says) || strings.Contains(text(res), "/v1/") {
			t.Errorf("%s(%v): want a tool error naming %q and no route: %q", c.tool, c.args, c.says, text(res))
		}
	}
	b.mustCall("list_contacts", map[string]any{}, &contacts)
	if contacts.Policy != "contacts_only" || len(contacts.Requests) != 0 {
		t.Errorf("bob's contacts after bad arguments: %+v", contacts)
	}
}

type checkResultMail struct {
	Messages []mailMessage `json:"messages"`
}

// decode reads a tool result's structured content into out.
func decode(t *testing.T, res *mcp.CallToolResult, out any) {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

// TestMCPSendToStoppedDaemon: a daemon that takes the request and does not
// answer (stopped, as kill -STOP does) is reported as running but not
// answering, not as absent; a send_message whose outcome is so unknown
// names the client_message_id the server made for it, and calling again
// with it once the daemon runs delivers the message once.
func TestMCPSendToStoppedDaemon(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	d := startDaemon(t, e, "--no-tcp")
	a := startMCP(t, e, "alice", mcpOptions{lean: true})
	b := startMCP(t, e, "bob", mcpOptions{lean: true})
	a.waitPeer("bob")

	if err := syscall.Kill(d.pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	res := a.call("send_message", map[string]any{"to": "bob", "message": "are you there?"})
	if err := syscall.Kill(d.pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	got := regexp.MustCompile(`did not answer in time.*client_message_id is (\S+): pass it when you call again`).FindStringSubmatch(text(res))
	if !res.IsError || got == nil || strings.Contains(text(res), "not running") {
		t.Fatalf("send_message to a stopped daemon: %q", text(res))
	}
	var sent sendResult
	a.mustCall("send_message", map[string]any{"to": "bob", "message": "are you there?", "client_message_id": got[1]}, &sent)
	if sent.ClientMessageID != got[1] {
		t.Fatalf("the send again: %+v", sent)
	}
	var inbox checkResultMail
	wait.For(t, e2eDeliverDeadline, "bob's message", func() bool {
		decode(t, b.call("check_messages", map[string]any{}), &inbox)
		return len(inbox.Messages) > 0
	})
	a.mustCall("send_message", map[string]any{"to": "bob", "message": "a later one"}, &sent)
	var later checkResultMail
	wait.For(t, e2eDeliverDeadline, "bob's later message", func() bool {
		later = checkResultMail{}
		decode(t, b.call("check_messages", map[string]any{}), &later)
		return len(later.Messages) > 0
	})
	if len(inbox.Messages) != 1 || len(later.Messages) != 1 || later.Messages[0].ClientMessageID != sent.ClientMessageID {
		t.Fatalf("bob got %+v, then %+v: the first message not exactly once", inbox.Messages, later.Messages)
	}
}
