package integration

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// TestTopics: topics through the real binaries — `claudemesh topic` on
// alice's and bob's daemons, our broker between them. A `#name` send is
// resolved to the topic's id, reaches the joined member live and stays in
// the history; a name no topic has is refused at /v1/send and nothing is
// stored; after bob leaves, the topic's messages no longer reach him.
func TestTopics(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)
	topicCLI := func(p *e2ePeer, out any, args ...string) {
		t.Helper()
		r := runCLI(t, p.env, append([]string{"topic"}, args...)...)
		if r.code != 0 {
			t.Fatalf("%s: claudemesh topic %s: exit %d\nstdout %s\nstderr %s", p.name, strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		if out != nil {
			if err := json.Unmarshal([]byte(r.stdout), out); err != nil {
				t.Fatalf("claudemesh topic %s --json printed %q: %v", strings.Join(args, " "), r.stdout, err)
			}
		}
	}

	var created messages.TopicCreated
	topicCLI(alice, &created, "create", "dev", "--description", "the dev team", "--json")
	if !created.Created || created.Topic.Name != "dev" || !messages.IsTopicID(created.Topic.ID) || created.Mesh != "demo" {
		t.Fatalf("topic create: %+v", created)
	}
	var joined messages.TopicMembers
	topicCLI(bob, &joined, "join", "dev", "--json")
	if len(joined.Members) != 2 {
		t.Fatalf("members after bob's join: %+v", joined)
	}
	var list messages.TopicList
	topicCLI(bob, &list, "list", "--json")
	if len(list.Topics) != 1 || list.Topics[0].ID != created.Topic.ID || list.Topics[0].MemberCount != 2 ||
		list.Topics[0].Description != "the dev team" {
		t.Fatalf("topic list: %+v", list)
	}

	stream := openSSE(t, bob.env.socket(), "")
	if st, body, err := trySend(alice.c, "#dev", "standup in 5", "topic-1"); err != nil || st != http.StatusAccepted {
		t.Fatalf("send #dev: %d %v %s", st, err, body)
	}
	got := messageOf(t, stream.next("message", e2eDeliverDeadline))
	if got.ClientMessageID != "topic-1" || got.Kind != "topic" || string(got.Topic) != created.Topic.ID || messages.Deref(got.Body) != "standup in 5" {
		t.Fatalf("bob's message: %+v", got)
	}

	// bob's inbox filtered by the topic's name: the item keeps the id, and
	// shows the name its daemon knows.
	for _, topic := range []string{"dev", created.Topic.ID} {
		r := runCLI(t, bob.env, "inbox", "--topic", topic, "--json")
		if r.code != 0 || !strings.Contains(r.stdout, `"client_message_id":"topic-1"`) || !strings.Contains(r.stdout, `"topic_name":"dev"`) {
			t.Fatalf("claudemesh inbox --topic %s: exit %d\n%s%s", topic, r.code, r.stdout, r.stderr)
		}
	}
	if r := runCLI(t, bob.env, "inbox"); r.code != 0 || !strings.Contains(r.stdout, "#dev ") {
		t.Fatalf("claudemesh inbox: exit %d\n%s%s; want the message shown to #dev", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, bob.env, "inbox", "--topic", "nope", "--json"); r.code != 0 || strings.Contains(r.stdout, "topic-1") {
		t.Fatalf("claudemesh inbox --topic nope: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Followed by name, a live message (its event carries the id alone) is
	// matched and shown by name too.
	follow, lines := startCLILines(t, bob.env, "inbox", "--topic", "dev", "-f")
	line := func() string {
		t.Helper()
		select {
		case l := <-lines:
			return l
		case <-time.After(e2eDeliverDeadline):
			t.Fatal("claudemesh inbox --topic dev -f printed nothing")
			return ""
		}
	}
	if l := line(); !strings.Contains(l, "#dev ") || !strings.HasSuffix(l, ": standup in 5") {
		t.Fatalf("first line of inbox --topic dev -f: %q", l)
	}
	if st, body, err := trySend(alice.c, "#dev", "live on dev", "topic-live"); err != nil || st != http.StatusAccepted {
		t.Fatalf("send #dev: %d %v %s", st, err, body)
	}
	if l := line(); !strings.Contains(l, "#dev ") || !strings.HasSuffix(l, ": live on dev") {
		t.Fatalf("live line of inbox --topic dev -f: %q", l)
	}
	follow.Process.Signal(syscall.SIGINT)
	follow.Wait()
	if got := messageOf(t, stream.next("message", e2eDeliverDeadline)); got.ClientMessageID != "topic-live" {
		t.Fatalf("bob's stream after topic-live: %+v", got)
	}

	st, body, err := trySend(alice.c, "#nope", "to no one", "topic-missing")
	var refusal messages.ErrorBody
	if err != nil || st != http.StatusNotFound || json.Unmarshal(body, &refusal) != nil || refusal.Error != messages.CodeTopicNotFound {
		t.Fatalf("send #nope: %d %v %s; want 404 topic_not_found", st, err, body)
	}
	if rows := byClientID(listAll(t, alice.c, "")); len(rows) != 2 || rows["topic-missing"].ID != "" {
		t.Fatalf("alice's outbox after the refusal: %+v", rows)
	}

	var history messages.TopicHistory
	topicCLI(bob, &history, "history", "dev", "--json")
	if len(history.Messages) != 2 || messages.Deref(history.Messages[1].Body) != "standup in 5" ||
		history.Messages[1].SenderName != "alice" || history.Messages[1].ID != got.BrokerMessageID {
		t.Fatalf("topic history: %+v", history)
	}
	if r := runCLI(t, bob.env, "topic", "members", "dev"); r.code != 0 || !strings.Contains(r.stdout, "alice") ||
		!strings.Contains(r.stdout, "lead") || !strings.Contains(r.stdout, "bob") {
		t.Fatalf("topic members: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, bob.env, "topic", "join", "nope"); r.code == 0 || !strings.Contains(r.stderr, "topic list") {
		t.Fatalf("topic join nope: exit %d\n%s%s; want a failure that says how to list topics", r.code, r.stdout, r.stderr)
	}

	topicCLI(bob, nil, "leave", "dev")
	if st, body, err := trySend(alice.c, "#dev", "bob has left", "topic-2"); err != nil || st != http.StatusAccepted {
		t.Fatalf("send #dev after the leave: %d %v %s", st, err, body)
	}
	if st, body, err := trySend(alice.c, "*", "marker", "marker"); err != nil || st != http.StatusAccepted {
		t.Fatalf("send *: %d %v %s", st, err, body)
	}
	// Pushes to bob come in the order alice's messages were accepted: once
	// the marker is in, topic-2 would have come before it.
	if next := messageOf(t, stream.next("message", e2eDeliverDeadline)); next.ClientMessageID != "marker" {
		t.Fatalf("after bob left #dev he got %+v, want the marker", next)
	}
	// A topic alice's daemon has not seen: the miss refreshes its list.
	topicCLI(bob, nil, "create", "ops")
	if st, body, err := trySend(alice.c, "#ops", "ops is open", "topic-3"); err != nil || st != http.StatusAccepted {
		t.Fatalf("send #ops, created after alice's daemon listed the topics: %d %v %s", st, err, body)
	}
	if next := messageOf(t, stream.next("message", e2eDeliverDeadline)); next.ClientMessageID != "topic-3" {
		t.Fatalf("bob, lead of #ops, got %+v", next)
	}
	// A topic id passes as it is.
	if st, body, err := trySend(alice.c, "#"+created.Topic.ID, "by id", "topic-4"); err != nil || st != http.StatusAccepted {
		t.Fatalf("send #<id>: %d %v %s", st, err, body)
	}
	wait.For(t, e2eDeliverDeadline, "topic-4 done at alice", func() bool {
		return byClientID(listAll(t, alice.c, "done"))["topic-4"].ID != ""
	})
	topicCLI(alice, &history, "history", created.Topic.ID, "--json")
	if len(history.Messages) != 4 || messages.Deref(history.Messages[0].Body) != "by id" {
		t.Fatalf("history of #dev after topic-4: %+v", history)
	}

	// Restarted, bob's daemon has listed no topic yet: its connection asks
	// the broker for them as it connects.
	bob.d.stop()
	bob.start(t)
	wait.For(t, e2eConnectDeadline, "the topic's name known again after bob's restart", func() bool {
		r := runCLI(t, bob.env, "inbox", "--json")
		return r.code == 0 && strings.Contains(r.stdout, `"topic_name":"dev"`)
	})
}

// TestTopicsPerSession: topic membership is an agent session's own, on
// the embedded (SQLite) broker of one daemon. The daemon's member creates
// #x and leads it as itself; of the sessions bee and cat, bee joins and
// only bee receives #x from ant; cat joins and bee leaves, and only cat
// receives, the topic keeping its other members; the member received both
// as a member of its own. The members list names sessions by their names.
func TestTopicsPerSession(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	d := startDaemon(t, e, "--no-tcp")
	defer d.stop()
	ctx := context.Background()
	machine := ipc.NewClient(e.socket())
	wait.For(t, e2eConnectDeadline, "the machine's member creates #x once its link is up", func() bool {
		_, err := machine.CreateTopic(ctx, &messages.TopicCreateRequest{Name: "x"})
		return err == nil
	})
	ant := registerSession(t, e.socket(), "local", "sess-ant", "ant")
	bee := registerSession(t, e.socket(), "local", "sess-bee", "bee")
	cat := registerSession(t, e.socket(), "local", "sess-cat", "cat")
	wait.For(t, e2eConnectDeadline, "ant, bee and cat connected to the broker", func() bool {
		peers, err := ant.c.Peers(ctx, "")
		return err == nil && slices.ContainsFunc(peers, func(p ipc.MeshPeer) bool { return p.DisplayName == "bee" }) &&
			slices.ContainsFunc(peers, func(p ipc.MeshPeer) bool { return p.DisplayName == "cat" })
	})
	beeEv, catEv := followSession(t, bee), followSession(t, cat)
	keys := map[string]string{ant.name: ant.pubkey, bee.name: bee.pubkey, cat.name: cat.pubkey}
	// members checks the members of #x after s's join or leave: the
	// machine's member, its lead, and the sessions named, by their names
	// and keys.
	members := func(s *agentSession, op func(context.Context, *messages.TopicMembershipRequest) (*messages.TopicMembers, error),
		want ...string) {
		t.Helper()
		res, err := ipc.WhenLinked(ctx, func() (*messages.TopicMembers, error) { // safe to repeat
			return op(ctx, &messages.TopicMembershipRequest{Topic: "x"})
		})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		var sessions []string
		lead := ""
		for _, tm := range res.Members {
			if tm.Role == "lead" {
				lead = tm.Pubkey
			} else if keys[tm.DisplayName] == tm.Pubkey {
				sessions = append(sessions, tm.DisplayName)
			}
		}
		slices.Sort(sessions)
		if len(res.Members) != len(want)+1 || lead == "" || slices.Contains(slices.Collect(maps.Values(keys)), lead) ||
			!slices.Equal(sessions, want) {
			t.Fatalf("%s: members of #x %+v; want the machine's member as lead, and %q", s.name, res.Members, want)
		}
	}

	members(bee, bee.c.JoinTopic, "bee")
	send(t, ant, "#x", "one")
	beeEv.expect(t, "bee", "one")
	catEv.quiet(t, "cat", ant, cat) // cat did not join

	members(cat, cat.c.JoinTopic, "bee", "cat")
	members(bee, bee.c.LeaveTopic, "cat")
	send(t, ant, "#x", "two")
	catEv.expect(t, "cat", "two")
	beeEv.quiet(t, "bee", ant, bee) // bee left

	wait.For(t, e2eDeliverDeadline, "one and two in the machine's inbox", func() bool {
		page, err := machine.Inbox(ctx, url.Values{"mesh": {"local"}, "topic": {"x"}, "mark_seen": {"false"}})
		if err != nil {
			return false
		}
		var bodies []string
		for _, it := range page.Items {
			bodies = append(bodies, messages.Deref(it.Body))
		}
		return slices.Equal(bodies, []string{"one", "two"})
	})

	// A topic a session created, which bee joins by name without listing
	// the topics: bee's inbox names it all the same.
	if _, err := ant.c.CreateTopic(ctx, &messages.TopicCreateRequest{Name: "y"}); err != nil {
		t.Fatalf("ant creates #y: %v", err)
	}
	if _, err := bee.c.JoinTopic(ctx, &messages.TopicMembershipRequest{Topic: "y"}); err != nil {
		t.Fatalf("bee joins #y: %v", err)
	}
	send(t, ant, "#y", "three")
	beeEv.expect(t, "bee", "three")
	page, err := bee.c.Inbox(ctx, nil)
	if err != nil || len(page.Items) == 0 || messages.Deref(page.Items[len(page.Items)-1].Body) != "three" ||
		page.Items[len(page.Items)-1].TopicName != "y" {
		t.Fatalf("bee's inbox: %+v, %v; want three last, to #y by name", page, err)
	}
}
