package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// fetched is fetch_inbox's result.
type fetched struct {
	Messages []struct {
		mailMessage
		Kind       string `json:"kind"`
		ReceivedAt string `json:"received_at"`
		ReplyToID  string `json:"reply_to_id"`
		Read       bool   `json:"read"`
	} `json:"messages"`
	NextCursor string `json:"next_cursor"`
}

// rfc3339 is a time the tools wrote.
func rfc3339(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// bodies are the texts of a fetch_inbox result, in order.
func (f *fetched) bodies() string {
	var b []string
	for _, m := range f.Messages {
		b = append(b, m.Body)
	}
	return strings.Join(b, ",")
}

// TestMCPInboxTools: the tools beside check_messages through `claudemesh
// mcp` and claudemesh-mcp as two agent sessions. A send to a list is one
// message per recipient under <key>/<recipient> (two names of one peer:
// one), retried without a second; a list with an unknown name sends
// nothing. fetch_inbox lists without marking read, filters by since,
// urgent_only and topic, pages with its cursor; mark_read marks;
// reply_message answers in the thread with Re: and the importance. whois,
// set_summary, list_peers' mesh_slug, health_check, skill_publish and
// guard_install do what they say, and a pushed message's channel meta
// carries upstream claudemesh's keys too.
func TestMCPInboxTools(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	a := startMCP(t, e, "alice", mcpOptions{channel: true})
	b := startMCP(t, e, "bob", mcpOptions{lean: true})
	a.waitPeer("bob")
	b.waitPeer("alice")

	// Upstream's names: set_summary, list_peers with mesh_slug, whois.
	b.mustCall("set_summary", map[string]any{"summary": "testing the inbox"}, nil)
	var who struct {
		Name    string `json:"name"`
		Pubkey  string `json:"pubkey"`
		Online  bool   `json:"online"`
		Summary string `json:"summary"`
		You     bool   `json:"you"`
	}
	wait.For(t, e2eConnectDeadline, "bob's summary in alice's whois", func() bool {
		a.mustCall("whois", map[string]any{"name": "bob"}, &who)
		return who.Summary == "testing the inbox"
	})
	if who.Name != "bob" || len(who.Pubkey) != 64 || !who.Online || who.You {
		t.Errorf("whois bob: %+v", who)
	}
	if res := a.call("whois", map[string]any{"name": "nobody-here"}); !res.IsError || !strings.Contains(text(res), "list_peers") {
		t.Errorf("whois of nobody: IsError %v, %q", res.IsError, text(res))
	}
	var peers peersResult
	a.mustCall("list_peers", map[string]any{}, &peers)
	var mesh struct {
		Mesh string `json:"mesh"`
	}
	a.mustCall("list_peers", map[string]any{}, &mesh)
	a.mustCall("list_peers", map[string]any{"mesh_slug": mesh.Mesh}, nil)
	if res := a.call("list_peers", map[string]any{"mesh_slug": "elsewhere"}); !res.IsError || !strings.Contains(text(res), mesh.Mesh) {
		t.Errorf("list_peers of another mesh: IsError %v, %q", res.IsError, text(res))
	}

	// A send to a list.
	before := len(listAll(t, c, ""))
	if res := a.call("send_message", map[string]any{"to": []string{"bob", "nobody-here"}, "message": "x"}); !res.IsError {
		t.Errorf("a list with an unknown name: not an error: %q", text(res))
	}
	if n := len(listAll(t, c, "")); n != before {
		t.Fatalf("a refused list send changed the outbox: %d rows, then %d", before, n)
	}
	var many struct {
		ClientMessageID string `json:"client_message_id"`
		Status          string `json:"status"`
		Recipients      []struct {
			To              string `json:"to"`
			ClientMessageID string `json:"client_message_id"`
			Status          string `json:"status"`
		} `json:"recipients"`
	}
	args := map[string]any{"to": []string{"bob", who.Pubkey, "*"}, "message": "hello all", "client_message_id": "multi-1"}
	a.mustCall("send_message", args, &many)
	if len(many.Recipients) != 2 || many.Recipients[0].ClientMessageID != "multi-1/bob" ||
		many.Recipients[1].ClientMessageID != "multi-1/*" || many.Status == "duplicate" {
		t.Fatalf("send to [bob, bob's key, *]: %+v", many)
	}
	first := many
	a.mustCall("send_message", args, &many) // a retry: the same ids, no new row
	if len(many.Recipients) != 2 || many.Recipients[0].ClientMessageID != first.Recipients[0].ClientMessageID ||
		len(listAll(t, c, "")) != before+2 {
		t.Errorf("the list send retried: %+v, %d rows, want %d", many, len(listAll(t, c, "")), before+2)
	}
	a.mustCall("send_message", map[string]any{"to": "bob", "message": "the deploy is red", "importance": "urgent",
		"subject": "deploy", "client_message_id": "urgent-1"}, nil)

	// fetch_inbox marks nothing read; its filters and cursor.
	var all fetched
	wait.For(t, e2eDeliverDeadline, "bob's three messages in fetch_inbox", func() bool {
		b.mustCall("fetch_inbox", map[string]any{}, &all)
		return len(all.Messages) == 3
	})
	if all.bodies() != "hello all,hello all,the deploy is red" || all.Messages[0].Read {
		t.Fatalf("fetch_inbox: %+v", all)
	}
	var again, urgent, toAll, page, rest fetched
	b.mustCall("fetch_inbox", map[string]any{}, &again)
	b.mustCall("fetch_inbox", map[string]any{"urgent_only": true}, &urgent)
	b.mustCall("fetch_inbox", map[string]any{"topic": "*"}, &toAll)
	b.mustCall("fetch_inbox", map[string]any{"limit": 2}, &page)
	b.mustCall("fetch_inbox", map[string]any{"limit": 2, "cursor": page.NextCursor}, &rest)
	if len(again.Messages) != 3 || urgent.bodies() != "the deploy is red" || len(toAll.Messages) != 1 || toAll.Messages[0].Kind != "topic" ||
		len(page.Messages) != 2 || page.NextCursor == "" || rest.bodies() != "the deploy is red" || rest.NextCursor != "" {
		t.Errorf("fetch_inbox again %d, urgent_only %q, topic * %+v, pages %d/%q then %q/%q", len(again.Messages), urgent.bodies(),
			toAll.Messages, len(page.Messages), page.NextCursor, rest.bodies(), rest.NextCursor)
	}
	var since, none fetched
	b.mustCall("fetch_inbox", map[string]any{"since": all.Messages[1].ReceivedAt}, &since)
	after := rfc3339(t, all.Messages[1].ReceivedAt)
	for _, m := range since.Messages {
		if !rfc3339(t, m.ReceivedAt).After(after) {
			t.Errorf("fetch_inbox since %s lists %+v", all.Messages[1].ReceivedAt, m)
		}
	}
	if b.mustCall("fetch_inbox", map[string]any{"topic": "#no-such-topic"}, &none); len(none.Messages) != 0 {
		t.Errorf("fetch_inbox of a topic nobody wrote to: %+v", none)
	}
	for _, bad := range []map[string]any{{"since": "yesterday"}, {"limit": 1001}, {"cursor": "junk"}} {
		if res := b.call("fetch_inbox", bad); !res.IsError || len(text(res)) > 400 {
			t.Errorf("fetch_inbox %v: IsError %v, %q", bad, res.IsError, text(res))
		}
	}

	// mark_read.
	var marked struct {
		Marked int `json:"marked"`
	}
	b.mustCall("mark_read", map[string]any{"ids": []string{all.Messages[0].ID}}, &marked)
	var unread, withRead fetched
	b.mustCall("fetch_inbox", map[string]any{}, &unread)
	b.mustCall("fetch_inbox", map[string]any{"include_read": true}, &withRead)
	if marked.Marked != 1 || len(unread.Messages) != 2 || len(withRead.Messages) != 3 || !withRead.Messages[0].Read {
		t.Errorf("mark_read: %+v; unread %d, with read %d (first read %v)", marked, len(unread.Messages), len(withRead.Messages),
			len(withRead.Messages) > 0 && withRead.Messages[0].Read)
	}
	b.mustCall("mark_read", map[string]any{"ids": []string{all.Messages[0].ID}}, &marked)
	if marked.Marked != 0 {
		t.Errorf("mark_read of a read message: %+v", marked)
	}

	// reply_message: to the sender, in the thread, Re: and the importance.
	if res := b.call("reply_message", map[string]any{"id": "no-such-id", "message": "x"}); !res.IsError ||
		!strings.Contains(text(res), "no message") {
		t.Errorf("reply_message to nothing: IsError %v, %q", res.IsError, text(res))
	}
	b.mustCall("reply_message", map[string]any{"id": all.Messages[2].ID, "message": "on it"}, nil)
	note := a.nextChannel()
	for k, want := range map[string]string{"from_name": "bob", "from": "bob", "priority": "next", "subject": "Re: deploy",
		"thread_id": "urgent-1", "reply_to_id": "urgent-1", "importance": "urgent"} {
		if note.Meta[k] != want {
			t.Errorf("alice's push of bob's reply: meta %s = %q, want %q (%v)", k, note.Meta[k], want, note.Meta)
		}
	}
	if note.Content != "on it" || note.Meta["from_id"] == "" || note.Meta["mesh_slug"] != mesh.Mesh || note.Meta["sent_at"] == "" {
		t.Errorf("alice's push of bob's reply: %+v", note)
	}

	// health_check, skill_publish, guard_install.
	var health struct {
		Status          string   `json:"status"`
		Problems        []string `json:"problems"`
		Mesh            string   `json:"mesh"`
		BrokerConnected bool     `json:"broker_connected"`
	}
	b.mustCall("health_check", map[string]any{}, &health)
	if health.Status != "ok" || !health.BrokerConnected || health.Mesh != mesh.Mesh || len(health.Problems) != 0 {
		t.Errorf("health_check: %+v", health)
	}
	var skill struct {
		Skill struct {
			Name    string `json:"name"`
			Version int    `json:"version"`
		} `json:"skill"`
	}
	for v := 1; v <= 2; v++ {
		a.mustCall("skill_publish", map[string]any{"name": "review", "content": "read every diff twice", "tags": []string{"code"}}, &skill)
		if skill.Skill.Name != "review" || skill.Skill.Version != v {
			t.Errorf("skill_publish #%d: %+v", v, skill)
		}
	}
	var got struct {
		Content string `json:"content"`
	}
	b.mustCall("skill_get", map[string]any{"name": "review"}, &got)
	if got.Content != "read every diff twice" {
		t.Errorf("skill_get of the published skill: %+v", got)
	}
	if res := a.call("skill_publish", map[string]any{"name": "Bad Name", "content": "x"}); !res.IsError {
		t.Errorf("skill_publish of a bad name: %q", text(res))
	}
	repo := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	var guard struct {
		Hooks []string `json:"hooks"`
	}
	a.mustCall("guard_install", map[string]any{"dir": repo, "offline": "refuse"}, &guard)
	if len(guard.Hooks) != 2 {
		t.Fatalf("guard_install: %+v", guard)
	}
	for _, hook := range []string{"pre-commit", "pre-push"} {
		b, err := os.ReadFile(filepath.Join(repo, ".git", "hooks", hook))
		if err != nil || !strings.Contains(string(b), "claudemesh guard") || !strings.Contains(string(b), "--offline=refuse") {
			t.Errorf("%s after guard_install: %v\n%s", hook, err, b)
		}
	}
	if res := a.call("guard_install", map[string]any{"dir": t.TempDir()}); !res.IsError || !strings.Contains(text(res), "git") {
		t.Errorf("guard_install outside a repository: IsError %v, %q", res.IsError, text(res))
	}
	t.Log("checked: a list send is one message per recipient under <key>/<recipient> and retries as duplicates; fetch_inbox lists " +
		"without marking, with since, urgent_only, topic and a cursor; mark_read; reply_message in the thread; upstream's set_summary, " +
		"mesh_slug and meta keys; whois; health_check; skill_publish; guard_install")
}
