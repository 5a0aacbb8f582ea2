package broker

import (
	"context"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/persistence"
)

func TestTopicMembership(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob, carol := e.join(t, m, "alice"), e.join(t, m, "bob"), e.join(t, m, "carol")

		topic, created, err := e.s.CreateTopic(ctx, m.ID, TopicParty{MemberID: alice.ID}, NewTopic{Name: "general", Description: "all hands"})
		if err != nil || !created {
			t.Fatalf("CreateTopic = %v, %v", created, err)
		}
		if !regexp.MustCompile(`^[0-9A-Za-z]{32}$`).MatchString(topic.ID) {
			t.Errorf("topic id %q is not 32 of [0-9A-Za-z]", topic.ID)
		}
		if topic.Visibility != VisibilityPublic || topic.MemberCount != 1 || topic.Description != "all hands" {
			t.Errorf("created topic = %+v", topic)
		}
		again, created, err := e.s.CreateTopic(ctx, m.ID, TopicParty{MemberID: bob.ID}, NewTopic{Name: "general", Visibility: VisibilityPrivate})
		if err != nil || created || again.ID != topic.ID || again.Visibility != VisibilityPublic {
			t.Fatalf("CreateTopic of a taken name = %+v, %v, %v; want the existing topic", again, created, err)
		}
		if err := e.s.JoinTopic(ctx, topic.ID, TopicParty{MemberID: carol.ID}, RoleObserver); err != nil {
			t.Fatal(err)
		}
		if err := e.s.JoinTopic(ctx, topic.ID, TopicParty{MemberID: carol.ID}, ""); err != nil { // "" keeps the role
			t.Fatal(err)
		}
		members, err := e.s.TopicMembers(ctx, topic.ID)
		if err != nil {
			t.Fatal(err)
		}
		roles := map[string]string{}
		for _, mm := range members {
			roles[mm.DisplayName] = mm.Role
		}
		if want := map[string]string{"alice": RoleLead, "bob": RoleMember, "carol": RoleObserver}; !maps.Equal(roles, want) {
			t.Errorf("members = %v, want %v", roles, want)
		}
		if err := e.s.LeaveTopic(ctx, topic.ID, TopicParty{MemberID: bob.ID}); err != nil {
			t.Fatal(err)
		}
		joined, err := e.s.TopicRecipients(ctx, m.ID, topic.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{alice.Pubkey, carol.Pubkey}
		slices.Sort(want)
		if !slices.Equal(joined.Members, want) || len(joined.Sessions) != 0 {
			t.Errorf("recipients = %+v, want members %v", joined, want)
		}
		if err := e.s.RevokeMember(ctx, m.ID, carol.Pubkey); err != nil {
			t.Fatal(err)
		}
		if joined, _ := e.s.TopicRecipients(ctx, m.ID, topic.ID); !slices.Equal(joined.Members, []string{alice.Pubkey}) {
			t.Errorf("recipients after carol's revocation = %+v", joined)
		}

		e.clock.Advance(time.Minute)
		if err := e.s.MarkTopicRead(ctx, topic.ID, TopicParty{MemberID: alice.ID}); err != nil {
			t.Fatal(err)
		}
		members, _ = e.s.TopicMembers(ctx, topic.ID)
		if len(members) != 1 || members[0].LastReadAt == nil || !members[0].LastReadAt.Equal(e.clock.Now().Truncate(time.Millisecond)) {
			t.Errorf("after mark read: %+v", members)
		}

		byName, err := e.s.Topic(ctx, m.ID, "general")
		if err != nil || byName.ID != topic.ID || byName.MemberCount != 1 {
			t.Errorf("Topic(name) = %+v, %v", byName, err)
		}
		if byID, err := e.s.Topic(ctx, m.ID, topic.ID); err != nil || byID.Name != "general" {
			t.Errorf("Topic(id) = %+v, %v", byID, err)
		}
		other := e.mesh(t, Mesh{})
		for _, ref := range []string{"nope", topic.ID} {
			if _, err := e.s.Topic(ctx, other.ID, ref); !errors.Is(err, ErrTopicNotFound) {
				t.Errorf("Topic(%q) in another mesh = %v, want ErrTopicNotFound", ref, err)
			}
		}
		if _, err := e.s.TopicRecipients(ctx, m.ID, "general"); !errors.Is(err, ErrTopicNotFound) {
			t.Errorf("TopicRecipients by name = %v, want ErrTopicNotFound (a # target is an id)", err)
		}
		if list, err := e.s.Topics(ctx, other.ID); err != nil || len(list) != 0 {
			t.Errorf("Topics of another mesh = %v, %v", list, err)
		}
	})
}

// TestTopicSessionMembership: an agent session joins, leads, leaves and
// marks read for itself — its member and the member's other sessions keep
// their own memberships — and is listed by its session's key and name; a
// send to the topic reaches the members joined as themselves and the
// joined sessions; a revoked member's sessions count no more.
func TestTopicSessionMembership(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		s1 := TopicParty{MemberID: alice.ID, SessionPubkey: newPubkey(t), SessionName: "alice-build"}
		s2 := TopicParty{MemberID: alice.ID, SessionPubkey: newPubkey(t), SessionName: "alice-docs"}
		bobs := TopicParty{MemberID: bob.ID, SessionPubkey: newPubkey(t)} // no name of its own: listed as bob

		topic, created, err := e.s.CreateTopic(ctx, m.ID, s1, NewTopic{Name: "builds"})
		if err != nil || !created || topic.MemberCount != 1 || topic.CreatedBy != alice.ID {
			t.Fatalf("CreateTopic by a session = %+v, %v, %v", topic, created, err)
		}
		members := func() map[string]TopicMember {
			t.Helper()
			list, err := e.s.TopicMembers(ctx, topic.ID)
			if err != nil {
				t.Fatal(err)
			}
			byKey := map[string]TopicMember{}
			for _, tm := range list {
				byKey[tm.Pubkey] = tm
			}
			return byKey
		}
		if got := members(); len(got) != 1 || got[s1.SessionPubkey].Role != RoleLead ||
			got[s1.SessionPubkey].DisplayName != "alice-build" || got[s1.SessionPubkey].MemberID != alice.ID {
			t.Fatalf("members after a session created the topic = %+v; want the session alone, as lead", got)
		}
		recipients := func(members, sessions []string) {
			t.Helper()
			joined, err := e.s.TopicRecipients(ctx, m.ID, topic.ID)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(members)
			slices.Sort(sessions)
			if !slices.Equal(joined.Members, members) || !slices.Equal(joined.Sessions, sessions) {
				t.Errorf("recipients = %+v, want members %v and sessions %v", joined, members, sessions)
			}
		}
		recipients([]string{}, []string{s1.SessionPubkey})

		for _, p := range []TopicParty{{MemberID: alice.ID}, bobs} {
			if err := e.s.JoinTopic(ctx, topic.ID, p, ""); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := e.s.CreateTopic(ctx, m.ID, s2, NewTopic{Name: "builds"}); err != nil { // joins it
			t.Fatal(err)
		}
		got := members()
		if len(got) != 4 || got[alice.Pubkey].DisplayName != "alice" || got[bobs.SessionPubkey].DisplayName != "bob" ||
			got[s2.SessionPubkey].Role != RoleMember || got[s1.SessionPubkey].Role != RoleLead {
			t.Fatalf("members = %+v", got)
		}
		recipients([]string{alice.Pubkey}, []string{s1.SessionPubkey, s2.SessionPubkey, bobs.SessionPubkey})

		// Leaving is the leaver's alone: the session, then the member.
		if err := e.s.LeaveTopic(ctx, topic.ID, s1); err != nil {
			t.Fatal(err)
		}
		recipients([]string{alice.Pubkey}, []string{s2.SessionPubkey, bobs.SessionPubkey})
		if err := e.s.LeaveTopic(ctx, topic.ID, TopicParty{MemberID: alice.ID}); err != nil {
			t.Fatal(err)
		}
		recipients([]string{}, []string{s2.SessionPubkey, bobs.SessionPubkey})
		if byName, _ := e.s.Topic(ctx, m.ID, "builds"); byName.MemberCount != 2 {
			t.Errorf("member count = %d, want 2", byName.MemberCount)
		}

		// Marked read by one session, joined again under another name.
		e.clock.Advance(time.Minute)
		if err := e.s.MarkTopicRead(ctx, topic.ID, s2); err != nil {
			t.Fatal(err)
		}
		s2.SessionName = "alice-docs-2"
		if err := e.s.JoinTopic(ctx, topic.ID, s2, RoleObserver); err != nil {
			t.Fatal(err)
		}
		got = members()
		if s := got[s2.SessionPubkey]; s.LastReadAt == nil || s.DisplayName != "alice-docs-2" || s.Role != RoleObserver ||
			got[bobs.SessionPubkey].LastReadAt != nil {
			t.Errorf("after s2 marked read and joined again: %+v", got)
		}

		if err := e.s.RevokeMember(ctx, m.ID, alice.Pubkey); err != nil {
			t.Fatal(err)
		}
		recipients([]string{}, []string{bobs.SessionPubkey})
		if got := members(); len(got) != 1 {
			t.Errorf("members after alice's revocation = %+v, want bob's session", got)
		}
	})
}

// TestTopicMembersMigrated: the memberships of a database from before
// topic membership per session (migration 0021) stay their members'.
func TestTopicMembersMigrated(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice := e.join(t, m, "alice")
		topic, _, err := e.s.CreateTopic(ctx, m.ID, TopicParty{MemberID: alice.ID}, NewTopic{Name: "old"})
		if err != nil {
			t.Fatal(err)
		}
		all, err := persistence.LoadMigrations(e.s.d.migrations)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(all, func(m persistence.Migration) bool { return m.Version == 7 })
		create := all[i].SQL[strings.Index(all[i].SQL, "CREATE TABLE topic_member"):]
		create = create[:strings.Index(create, ";")]
		for _, stmt := range []string{"DROP TABLE topic_member", create, "DELETE FROM schema_migrations WHERE version = 21"} {
			if _, err := e.s.db.Exec(stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		if _, err := e.s.db.Exec(e.s.d.rewrite(`INSERT INTO topic_member (topic_id, member_id, role, joined_at)
			VALUES (?, ?, 'lead', ?)`), topic.ID, alice.ID, e.s.d.time(e.clock.Now())); err != nil {
			t.Fatal(err)
		}
		again := openEnv(t, e.opts)
		joined, err := again.s.TopicRecipients(ctx, m.ID, topic.ID)
		if err != nil || !slices.Equal(joined.Members, []string{alice.Pubkey}) || len(joined.Sessions) != 0 {
			t.Fatalf("recipients after 0021 = %+v, %v; want alice as herself", joined, err)
		}
		if err := again.s.LeaveTopic(ctx, topic.ID, TopicParty{MemberID: alice.ID}); err != nil {
			t.Fatal(err)
		}
		if n := again.count(t, "topic_member"); n != 0 {
			t.Errorf("%d memberships after alice left, want 0", n)
		}
	})
}

func TestTopicValidation(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice := e.join(t, m, "alice")
		for _, bad := range []NewTopic{
			{Name: ""},
			{Name: "has space"},
			{Name: "#general"},
			{Name: string(make([]byte, 65))},
			{Name: "ok", Visibility: "secret"},
			{Name: "ok", Description: string(make([]byte, MaxTopicDescription+1))},
		} {
			if _, _, err := e.s.CreateTopic(ctx, m.ID, TopicParty{MemberID: alice.ID}, bad); !errors.Is(err, ErrInvalid) {
				t.Errorf("CreateTopic(%q, %q) = %v, want ErrInvalid", bad.Name, bad.Visibility, err)
			}
		}
		if n := e.count(t, "topic"); n != 0 {
			t.Errorf("%d topics stored by refused creates", n)
		}
		topic, _, err := e.s.CreateTopic(ctx, m.ID, TopicParty{MemberID: alice.ID}, NewTopic{Name: "ops"})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.s.JoinTopic(ctx, topic.ID, TopicParty{MemberID: alice.ID}, "owner"); !errors.Is(err, ErrInvalid) {
			t.Errorf("JoinTopic(role owner) = %v, want ErrInvalid", err)
		}
		if members, _ := e.s.TopicMembers(ctx, topic.ID); len(members) != 1 || members[0].Role != RoleLead {
			t.Errorf("a refused join changed the membership: %+v", members)
		}
	})
}

func TestTopicHistory(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		topic, _, err := e.s.CreateTopic(ctx, m.ID, TopicParty{MemberID: alice.ID}, NewTopic{Name: "dev"})
		if err != nil {
			t.Fatal(err)
		}
		post := func(id, body string) AcceptResult {
			r := dm(m, alice, bob, id, body)
			r.DestinationKind, r.DestinationRef, r.TargetSpec = KindTopic, topic.ID, "#"+topic.ID
			return e.accept(t, r)[0]
		}
		var ids []string
		for i, body := range []string{"b29uZQ==", "dHdv", "dGhyZWU="} {
			res := post("t-"+string(rune('a'+i)), body)
			if res.Outcome != Created {
				t.Fatalf("accept: %+v", res)
			}
			ids = append(ids, res.BrokerMessageID)
		}
		e.accept(t, dm(m, alice, bob, "dm-1", "ZG0=")) // not in the topic

		page, err := e.s.TopicHistory(ctx, m.ID, topic.ID, 2, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(page) != 2 || page[0].ID != ids[2] || page[1].ID != ids[1] {
			t.Fatalf("first page = %+v, want the newest two", page)
		}
		if page[0].SenderPubkey != alice.Pubkey || page[0].SenderName != "alice" || page[0].SenderMemberID != alice.ID ||
			page[0].Ciphertext != "dGhyZWU=" {
			t.Errorf("history row = %+v", page[0])
		}
		rest, err := e.s.TopicHistory(ctx, m.ID, topic.ID, 0, page[1].ID)
		if err != nil || len(rest) != 1 || rest[0].ID != ids[0] {
			t.Errorf("page before %s = %+v, %v", page[1].ID, rest, err)
		}
		if other, err := e.s.TopicHistory(ctx, m.ID, "nope", 0, ""); err != nil || len(other) != 0 {
			t.Errorf("history of an unknown topic = %+v, %v", other, err)
		}
	})
}
