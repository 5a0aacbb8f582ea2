package broker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSkillPublishReplaceGetRemove(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m, other := e.mesh(t, Mesh{}), e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")

		first, err := e.s.PublishSkill(ctx, m.ID, alice.ID, NewSkill{Name: "deploy", Description: "Ship a release",
			Content: "1. tag\n2. push", Tags: []string{"release", "ops"}})
		if err != nil {
			t.Fatal(err)
		}
		if first.Version != 1 || first.PublishedBy != alice.Pubkey || first.PublishedName != "alice" ||
			!slices.Equal(first.Tags, []string{"release", "ops"}) || first.Content != "1. tag\n2. push" {
			t.Fatalf("published = %+v", first)
		}
		e.clock.Advance(time.Minute)
		second, err := e.s.PublishSkill(ctx, m.ID, bob.ID, NewSkill{Name: "deploy", Content: "just push"})
		if err != nil {
			t.Fatal(err)
		}
		if second.Version != 2 || second.PublishedBy != bob.Pubkey || second.Content != "just push" ||
			second.Description != "" || len(second.Tags) != 0 || !second.PublishedAt.After(first.PublishedAt) {
			t.Fatalf("republished = %+v, want version 2 by bob replacing everything", second)
		}
		if n := e.count(t, "skill WHERE mesh_id = ?", m.ID); n != 1 {
			t.Fatalf("%d rows for one name", n)
		}
		if _, err := e.s.Skill(ctx, other.ID, "deploy"); !errors.Is(err, ErrSkillNotFound) {
			t.Fatalf("another mesh's Skill = %v, want ErrSkillNotFound", err)
		}

		removed, err := e.s.RemoveSkill(ctx, m.ID, alice.ID, "deploy")
		if err != nil || !removed {
			t.Fatalf("RemoveSkill = %v, %v", removed, err)
		}
		removed, err = e.s.RemoveSkill(ctx, m.ID, alice.ID, "deploy")
		if err != nil || removed {
			t.Fatalf("RemoveSkill again = %v, %v; want false, nil", removed, err)
		}
		if _, err := e.s.Skill(ctx, m.ID, "deploy"); !errors.Is(err, ErrSkillNotFound) {
			t.Fatalf("Skill after remove = %v", err)
		}
		again, err := e.s.PublishSkill(ctx, m.ID, alice.ID, NewSkill{Name: "deploy", Content: "anew"})
		if err != nil || again.Version != 1 {
			t.Fatalf("publish after remove = %+v, %v; want version 1", again, err)
		}
	})
}

func TestSkillsQuery(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice := e.join(t, m, "alice")
		for _, sk := range []NewSkill{
			{Name: "deploy", Description: "Ship a Release to production", Content: "x"},
			{Name: "flaky-tests", Description: "How to find 100% of the flakes", Content: "x"},
			{Name: "review_pr", Description: "Review a pull request", Content: "x"},
		} {
			if _, err := e.s.PublishSkill(ctx, m.ID, alice.ID, sk); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			query string
			want  []string
		}{
			{"", []string{"deploy", "flaky-tests", "review_pr"}},
			{"RELEASE", []string{"deploy"}},
			{"re", []string{"deploy", "review_pr"}},
			{"100%", []string{"flaky-tests"}},
			{"%", []string{"flaky-tests"}},
			{"_", []string{"review_pr"}},
			{`\`, nil},
			{"' OR 1=1 --", nil},
			{"nothing", nil},
		} {
			skills, err := e.s.Skills(ctx, m.ID, c.query)
			if err != nil {
				t.Fatalf("Skills(%q): %v", c.query, err)
			}
			var names []string
			for _, sk := range skills {
				names = append(names, sk.Name)
			}
			if !slices.Equal(names, c.want) {
				t.Errorf("Skills(%q) = %v, want %v", c.query, names, c.want)
			}
		}
		if _, err := e.s.Skills(ctx, m.ID, strings.Repeat("q", MaxSkillQuery+1)); !errors.Is(err, ErrInvalid) {
			t.Errorf("an oversized query = %v, want ErrInvalid", err)
		}
	})
}

func TestSkillRefusals(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m, other := e.mesh(t, Mesh{}), e.mesh(t, Mesh{})
		alice, carol, stranger := e.join(t, m, "alice"), e.join(t, m, "carol"), e.join(t, other, "stranger")
		if _, err := e.s.PublishSkill(ctx, m.ID, alice.ID, NewSkill{Name: "kept", Content: "v1"}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			sk   NewSkill
		}{
			{"empty name", NewSkill{Content: "x"}},
			{"upper case", NewSkill{Name: "Deploy", Content: "x"}},
			{"leading dash", NewSkill{Name: "-x", Content: "x"}},
			{"space", NewSkill{Name: "a b", Content: "x"}},
			{"slash", NewSkill{Name: "a/b", Content: "x"}},
			{"65 bytes", NewSkill{Name: strings.Repeat("a", 65), Content: "x"}},
			{"no content", NewSkill{Name: "kept", Content: " \n"}},
			{"oversized content", NewSkill{Name: "kept", Content: strings.Repeat("x", MaxSkillContent+1)}},
			{"oversized description", NewSkill{Name: "kept", Content: "x", Description: strings.Repeat("d", MaxSkillDescription+1)}},
			{"not UTF-8", NewSkill{Name: "kept", Content: "\xff"}},
			{"too many tags", NewSkill{Name: "kept", Content: "x", Tags: make([]string, MaxSkillTags+1)}},
			{"empty tag", NewSkill{Name: "kept", Content: "x", Tags: []string{""}}},
			{"control in tag", NewSkill{Name: "kept", Content: "x", Tags: []string{"a\nb"}}},
		} {
			if _, err := e.s.PublishSkill(ctx, m.ID, alice.ID, c.sk); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: PublishSkill = %v, want ErrInvalid", c.name, err)
			}
		}
		if _, err := e.s.PublishSkill(ctx, m.ID, alice.ID, NewSkill{Name: strings.Repeat("a", 64), Content: "x"}); err != nil {
			t.Errorf("a 64-byte name: %v", err)
		}
		if err := e.s.RevokeMember(ctx, m.ID, carol.Pubkey); err != nil {
			t.Fatal(err)
		}
		if _, err := e.s.PublishSkill(ctx, m.ID, carol.ID, NewSkill{Name: "kept", Content: "v2"}); !errors.Is(err, ErrMemberRevoked) {
			t.Errorf("a revoked member's publish = %v, want ErrMemberRevoked", err)
		}
		if _, err := e.s.PublishSkill(ctx, m.ID, stranger.ID, NewSkill{Name: "kept", Content: "v2"}); !errors.Is(err, ErrMemberRevoked) {
			t.Errorf("another mesh's member's publish = %v, want ErrMemberRevoked", err)
		}
		if _, err := e.s.RemoveSkill(ctx, m.ID, carol.ID, "kept"); !errors.Is(err, ErrMemberRevoked) {
			t.Errorf("a revoked member's remove = %v, want ErrMemberRevoked", err)
		}
		kept, err := e.s.Skill(ctx, m.ID, "kept")
		if err != nil || kept.Version != 1 || kept.Content != "v1" {
			t.Fatalf("after the refusals: %+v, %v; want version 1 untouched", kept, err)
		}
		if n := e.count(t, "skill WHERE mesh_id = ?", m.ID); n != 2 {
			t.Fatalf("%d skills stored, want 2", n)
		}
	})
}
