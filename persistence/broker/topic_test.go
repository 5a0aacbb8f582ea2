package broker

import (
	"context"
	"errors"
	"maps"
	"regexp"
	"slices"
	"testing"
	"time"
)

func TestTopicMembership(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob, carol := e.join(t, m, "alice"), e.join(t, m, "bob"), e.join(t, m, "carol")

		topic, created, err := e.s.CreateTopic(ctx, m.ID, alice.ID, NewTopic{Name: "general", Description: "all hands"})
		if err != nil || !created {
			t.Fatalf("CreateTopic = %v, %v", created, err)
		}
		if !regexp.MustCompile(`^[0-9A-Za-z]{32}$`).MatchString(topic.ID) {
			t.Errorf("topic id %q is not 32 of [0-9A-Za-z]", topic.ID)
		}
		if topic.Visibility != VisibilityPublic || topic.MemberCount != 1 || topic.Description != "all hands" {
			t.Errorf("created topic = %+v", topic)
		}
		again, created, err := e.s.CreateTopic(ctx, m.ID, bob.ID, NewTopic{Name: "general", Visibility: VisibilityPrivate})
		if err != nil || created || again.ID != topic.ID || again.Visibility != VisibilityPublic {
			t.Fatalf("CreateTopic of a taken name = %+v, %v, %v; want the existing topic", again, created, err)
		}
		if err := e.s.JoinTopic(ctx, topic.ID, carol.ID, RoleObserver); err != nil {
			t.Fatal(err)
		}
		if err := e.s.JoinTopic(ctx, topic.ID, carol.ID, ""); err != nil { // "" keeps the role
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
		if err := e.s.LeaveTopic(ctx, topic.ID, bob.ID); err != nil {
			t.Fatal(err)
		}
		keys, err := e.s.TopicRecipients(ctx, m.ID, topic.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{alice.Pubkey, carol.Pubkey}
		slices.Sort(want)
		if !slices.Equal(keys, want) {
			t.Errorf("recipients = %v, want %v", keys, want)
		}
		if err := e.s.RevokeMember(ctx, m.ID, carol.Pubkey); err != nil {
			t.Fatal(err)
		}
		if keys, _ := e.s.TopicRecipients(ctx, m.ID, topic.ID); !slices.Equal(keys, []string{alice.Pubkey}) {
			t.Errorf("recipients after carol's revocation = %v", keys)
		}

		e.clock.Advance(time.Minute)
		if err := e.s.MarkTopicRead(ctx, topic.ID, alice.ID); err != nil {
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
			if _, _, err := e.s.CreateTopic(ctx, m.ID, alice.ID, bad); !errors.Is(err, ErrInvalid) {
				t.Errorf("CreateTopic(%q, %q) = %v, want ErrInvalid", bad.Name, bad.Visibility, err)
			}
		}
		if n := e.count(t, "topic"); n != 0 {
			t.Errorf("%d topics stored by refused creates", n)
		}
		topic, _, err := e.s.CreateTopic(ctx, m.ID, alice.ID, NewTopic{Name: "ops"})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.s.JoinTopic(ctx, topic.ID, alice.ID, "owner"); !errors.Is(err, ErrInvalid) {
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
		topic, _, err := e.s.CreateTopic(ctx, m.ID, alice.ID, NewTopic{Name: "dev"})
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
