package integration

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// agentMailTools are the tools `claudemesh mcp --tools agent-mail` lists.
var agentMailTools = []string{"acknowledge_message", "ensure_project", "fetch_inbox", "fetch_topic", "file_reservation_paths",
	"health_check", "install_precommit_guard", "list_contacts", "list_peers", "macro_start_session", "mark_message_read",
	"register_agent", "release_file_reservations", "renew_file_reservations", "reply_message", "respond_contact",
	"search_messages", "send_message", "set_contact_policy", "uninstall_precommit_guard", "whois"}

// TestMCPAgentMailTools: `claudemesh mcp --tools agent-mail` and
// claudemesh-mcp --tools agent-mail, as two agent sessions, serve Agent
// Mail's tools with its argument shapes (project_key, agent_name,
// sender_name taken and not used) and every one works: the start macro
// names the session and reserves; send_message to a list with a subject;
// fetch_inbox without bodies, then with; reply_message with Re:;
// acknowledge_message marks read; a reservation in the way refuses the
// whole request; renewal is a new grant; release by fence token frees
// the paths for the other agent; the guard installs and uninstalls.
func TestMCPAgentMailTools(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	agentMail := []string{"--tools", "agent-mail"}
	a := startMCP(t, e, "alice", mcpOptions{args: agentMail})
	b := startMCP(t, e, "bob", mcpOptions{args: agentMail, lean: true})

	ctx, cancel := context.WithTimeout(context.Background(), mcpDeadline)
	defer cancel()
	list, err := b.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		if tool.Annotations == nil || !strings.Contains(b.cs.InitializeResult().Instructions, tool.Name) {
			t.Errorf("%s: annotations %v, named in the instructions %v", tool.Name, tool.Annotations,
				strings.Contains(b.cs.InitializeResult().Instructions, tool.Name))
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, agentMailTools) {
		t.Fatalf("--tools agent-mail lists %v, want %v", names, agentMailTools)
	}
	a.waitPeer("bob")
	b.waitPeer("alice")
	project := map[string]any{"project_key": "/abs/path/backend", "agent_name": "GreenCastle", "registration_token": "tok"}
	with := func(args map[string]any) map[string]any {
		for k, v := range project {
			args[k] = v
		}
		return args
	}
	sender := func(args map[string]any) map[string]any { // send_message and reply_message name the sender instead
		args["project_key"], args["sender_name"], args["sender_token"] = "/abs/path/backend", "GreenCastle", "tok"
		return args
	}

	// Set-up: the project and the agent are the session's.
	var start struct {
		Project struct {
			Slug string `json:"slug"`
			Repo string `json:"repo"`
		} `json:"project"`
		Agent struct {
			Name string `json:"name"`
		} `json:"agent"`
		FileReservations *mcpReserveOut `json:"file_reservations"`
	}
	a.mustCall("macro_start_session", map[string]any{"human_key": "/abs/path/backend", "program": "claude-code", "model": "opus",
		"task_description": "writing the plan", "file_reservation_paths": []string{"docs/agentmail-test/**"}, "format": "json"}, &start)
	if start.Agent.Name != "alice" || start.Project.Slug == "" || !strings.HasPrefix(start.Project.Repo, "git:") ||
		start.FileReservations == nil || !start.FileReservations.Granted {
		t.Fatalf("macro_start_session: %+v", start)
	}
	var agent struct {
		Name string `json:"name"`
	}
	res := b.mustCall("register_agent", map[string]any{"project_key": "/abs/path/backend", "program": "codex", "model": "gpt",
		"name": "BlueLake", "task_description": "reviewing"}, &agent)
	if agent.Name != "bob" || !strings.Contains(text(res), "BlueLake was not taken") {
		t.Errorf("register_agent: %+v, %q", agent, text(res))
	}
	b.mustCall("ensure_project", map[string]any{"human_key": "/abs/path/backend"}, nil)
	var who struct {
		Summary string `json:"summary"`
	}
	wait.For(t, e2eConnectDeadline, "alice's task in bob's whois", func() bool {
		b.mustCall("whois", map[string]any{"project_key": "/abs/path/backend", "agent_name": "alice", "include_recent_commits": true}, &who)
		return who.Summary == "writing the plan"
	})

	// Mail.
	if res := a.call("send_message", sender(map[string]any{"to": []string{"bob"}, "subject": "x", "body_md": "x",
		"attachment_paths": []string{"a.png"}})); !res.IsError || !strings.Contains(text(res), "attachments") {
		t.Errorf("send_message with attachments: IsError %v, %q", res.IsError, text(res))
	}
	var sent struct {
		Recipients []struct {
			ResolvedTo string `json:"resolved_to"`
		} `json:"recipients"`
	}
	a.mustCall("send_message", sender(map[string]any{"to": []string{"bob"}, "cc": []string{"bob"},
		"subject": "plan", "body_md": "see the plan", "importance": "low", "ack_required": true, "topic": "planning"}), &sent)
	if len(sent.Recipients) != 1 {
		t.Errorf("send_message to bob, cc bob: %+v", sent)
	}
	var inbox fetched
	wait.For(t, e2eDeliverDeadline, "alice's message in bob's fetch_inbox", func() bool {
		b.mustCall("fetch_inbox", with(map[string]any{}), &inbox)
		return len(inbox.Messages) == 1
	})
	if m := inbox.Messages[0]; m.Subject != "plan" || m.Body != "" || !m.AckRequired {
		t.Errorf("fetch_inbox without bodies: %+v", m)
	}
	b.mustCall("fetch_inbox", with(map[string]any{"include_bodies": true, "urgent_only": false, "limit": 5}), &inbox)
	if len(inbox.Messages) != 1 || inbox.Messages[0].Body != "see the plan" {
		t.Fatalf("fetch_inbox with bodies: %+v", inbox)
	}
	orig := inbox.Messages[0]
	id := orig.ID
	b.mustCall("reply_message", sender(map[string]any{"message_id": id, "body_md": "looks right",
		"subject_prefix": "RE:"}), nil)
	var matches mailList
	b.mustCall("search_messages", with(map[string]any{"query": "plan"}), &matches)
	if len(matches.Messages) != 1 || matches.Messages[0].ID != id {
		t.Errorf("search_messages plan: %+v", matches)
	}
	b.mustCall("acknowledge_message", with(map[string]any{"message_id": id}), nil)
	if b.mustCall("fetch_inbox", with(map[string]any{}), &inbox); len(inbox.Messages) != 0 {
		t.Errorf("fetch_inbox after acknowledge_message: %+v", inbox)
	}
	var reply fetched
	wait.For(t, e2eDeliverDeadline, "bob's reply in alice's fetch_inbox", func() bool {
		a.mustCall("fetch_inbox", with(map[string]any{"include_bodies": true}), &reply)
		return len(reply.Messages) > 0 && reply.Messages[len(reply.Messages)-1].Body == "looks right"
	})
	r := reply.Messages[len(reply.Messages)-1]
	if r.Subject != "RE: plan" || r.ThreadID != orig.ClientMessageID || r.ReplyToID != orig.ClientMessageID {
		t.Errorf("bob's reply to %s: %+v", orig.ClientMessageID, r)
	}
	var read struct {
		Read bool `json:"read"`
	}
	a.mustCall("mark_message_read", with(map[string]any{"message_id": r.ID}), &read)
	if res := a.call("mark_message_read", with(map[string]any{"message_id": "nope"})); !read.Read || !res.IsError {
		t.Errorf("mark_message_read: %+v; of nothing: %q", read, text(res))
	}

	// File reservations: refused as a whole, renewed, released by fence.
	var refused mcpReserveOut
	b.mustCall("file_reservation_paths", with(map[string]any{"paths": []string{"docs/agentmail-test/a.md", "docs/other-test/**"},
		"ttl_seconds": 600, "exclusive": true, "reason": "bd-1"}), &refused)
	if refused.Granted || len(refused.Conflicts) != 1 || refused.Conflicts[0].Holder != "alice" {
		t.Errorf("bob's reservation over alice's: %+v", refused)
	}
	var renewed mcpReserveOut
	a.mustCall("renew_file_reservations", with(map[string]any{"extend_seconds": 900}), &renewed)
	if !renewed.Granted || renewed.FenceToken <= start.FileReservations.FenceToken {
		t.Errorf("renew_file_reservations: %+v after fence %d", renewed, start.FileReservations.FenceToken)
	}
	var released struct {
		Released []string `json:"released"`
	}
	a.mustCall("release_file_reservations", with(map[string]any{"file_reservation_ids": []int64{renewed.FenceToken}}), &released)
	if !slices.Equal(released.Released, []string{"docs/agentmail-test/**"}) {
		t.Errorf("release_file_reservations by fence: %+v", released)
	}
	var granted mcpReserveOut
	b.mustCall("file_reservation_paths", with(map[string]any{"paths": []string{"docs/agentmail-test/a.md"}}), &granted)
	if !granted.Granted {
		t.Errorf("bob's reservation once alice released: %+v", granted)
	}
	b.mustCall("release_file_reservations", with(map[string]any{}), nil)

	// The guard, contacts, health.
	repo := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	var guard struct {
		Hooks []string `json:"hooks"`
	}
	a.mustCall("install_precommit_guard", map[string]any{"project_key": "x", "code_repo_path": repo}, &guard)
	if len(guard.Hooks) != 2 {
		t.Errorf("install_precommit_guard: %+v", guard)
	}
	a.mustCall("uninstall_precommit_guard", map[string]any{"code_repo_path": repo}, &guard)
	if len(guard.Hooks) != 2 {
		t.Errorf("uninstall_precommit_guard: %+v", guard)
	}
	var policy struct {
		Policy string `json:"policy"`
	}
	b.mustCall("set_contact_policy", with(map[string]any{"policy": "auto"}), &policy)
	b.mustCall("list_contacts", with(map[string]any{}), nil)
	if res := b.call("respond_contact", with(map[string]any{"to_agent": "bob", "from_agent": "alice", "accept": true})); !res.IsError {
		t.Errorf("respond_contact with no request pending: %q", text(res))
	}
	if res := b.call("fetch_topic", with(map[string]any{"topic_name": "no-such-topic"})); !res.IsError {
		t.Errorf("fetch_topic of no topic: %q", text(res))
	}
	var health struct {
		Status string `json:"status"`
	}
	if b.mustCall("health_check", map[string]any{"format": "json"}, &health); health.Status != "ok" || policy.Policy != "auto" {
		t.Errorf("health_check %+v, contact policy %+v", health, policy)
	}
	if out, err := exec.Command(mcpBinPath, "--tools", "mail").CombinedOutput(); err == nil || !strings.Contains(string(out), "agent-mail") {
		t.Errorf("claudemesh-mcp --tools mail: %v %s", err, out)
	}
	t.Log("checked: --tools agent-mail lists Agent Mail's tools, annotated and named in the instructions, and each works with " +
		"Agent Mail's arguments: start macro, registration, whois, sends with cc and subject, fetch without and with bodies, reply, " +
		"search, acknowledge and mark read, reservations refused whole, renewed and released by fence, guard, contacts, health")
}
