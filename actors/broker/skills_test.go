package broker

import (
	"context"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// TestSkillFrames: publish_skill, list_skills (with a query), get_skill
// (null for a name the mesh lacks) and remove_skill over real
// connections, _reqId echoed; a republish bumps the version and another
// member sees it; refusals answer an error with the _reqId and store
// nothing.
func TestSkillFrames(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a, b := e.connect(alice, "a"), e.connect(bob, "b")

		a.send(map[string]any{"type": "publish_skill", "name": "deploy", "description": "Ship a release",
			"content": "1. tag\n2. push", "tags": []string{"ops"}, "_reqId": "p1"})
		f := a.next("skill_published")
		sk, _ := f["skill"].(map[string]any)
		if f["_reqId"] != "p1" || sk["name"] != "deploy" || sk["version"] != float64(1) || sk["publishedBy"] != "alice" ||
			sk["publishedByPubkey"] != alice.id.PublicKeyHex() || sk["content"] != "1. tag\n2. push" || sk["publishedAt"] == "" {
			t.Fatalf("skill_published = %v", f)
		}
		b.send(map[string]any{"type": "publish_skill", "name": "deploy", "description": "Ship it", "content": "push", "_reqId": "p2"})
		if sk := b.next("skill_published")["skill"].(map[string]any); sk["version"] != float64(2) || sk["publishedBy"] != "bob" {
			t.Fatalf("republished skill = %v, want version 2 by bob", sk)
		}
		b.send(map[string]any{"type": "publish_skill", "name": "review", "description": "Review a PR", "content": "read it", "_reqId": "p3"})
		b.next("skill_published")

		a.send(map[string]any{"type": "list_skills", "_reqId": "l1"})
		list := a.next("skill_list")
		skills, _ := list["skills"].([]any)
		if list["_reqId"] != "l1" || len(skills) != 2 {
			t.Fatalf("skill_list = %v", list)
		}
		if first := skills[0].(map[string]any); first["name"] != "deploy" || first["version"] != float64(2) ||
			first["description"] != "Ship it" || first["content"] != nil {
			t.Errorf("listed skill = %v (a list carries no content)", first)
		}
		a.send(map[string]any{"type": "list_skills", "query": "PR", "_reqId": "l2"})
		if skills, _ := a.next("skill_list")["skills"].([]any); len(skills) != 1 || skills[0].(map[string]any)["name"] != "review" {
			t.Errorf("list_skills query PR = %v", skills)
		}

		a.send(map[string]any{"type": "get_skill", "name": "deploy", "_reqId": "g1"})
		if got := a.next("skill_data"); got["_reqId"] != "g1" || got["skill"].(map[string]any)["content"] != "push" {
			t.Errorf("skill_data = %v", got)
		}
		a.send(map[string]any{"type": "get_skill", "name": "nope", "_reqId": "g2"})
		if got := a.next("skill_data"); got["_reqId"] != "g2" || got["skill"] != nil {
			t.Errorf("skill_data of a missing name = %v, want skill null", got)
		}

		a.send(map[string]any{"type": "remove_skill", "name": "review", "_reqId": "r1"})
		if got := a.next("skill_removed"); got["removed"] != true || got["_reqId"] != "r1" {
			t.Errorf("skill_removed = %v", got)
		}
		a.send(map[string]any{"type": "remove_skill", "name": "review", "_reqId": "r2"})
		if got := a.next("skill_removed"); got["removed"] != false || got["name"] != "review" {
			t.Errorf("second skill_removed = %v, want removed false", got)
		}

		for _, req := range []map[string]any{
			{"type": "publish_skill", "name": "Deploy", "content": "x", "_reqId": "bad-name"},
			{"type": "publish_skill", "name": "deploy", "content": strings.Repeat("x", broker.MaxSkillContent+1), "_reqId": "too-big"},
			{"type": "publish_skill", "name": "deploy", "content": "", "_reqId": "empty"},
			{"type": "list_skills", "query": strings.Repeat("q", broker.MaxSkillQuery+1), "_reqId": "long-query"},
		} {
			a.send(req)
			if got := a.next("error"); got["code"] != "invalid_args" || got["_reqId"] != req["_reqId"] || got["id"] != req["_reqId"] {
				t.Errorf("%v answered %v, want invalid_args with its _reqId", req["_reqId"], got)
			}
		}
		a.send(map[string]any{"type": "get_skill", "name": 7, "_reqId": "wrong-type"})
		if got := a.next("error"); got["code"] != "invalid_frame" {
			t.Errorf("a number as name answered %v, want invalid_frame", got)
		}
		kept, err := e.store.Skill(context.Background(), e.mesh.ID, "deploy")
		if err != nil || kept.Version != 2 || kept.Content != "push" {
			t.Fatalf("after the refusals: %+v, %v; want version 2 untouched", kept, err)
		}
	})
}

// TestNegotiationAdvertisesSharedData: the broker's answer names state,
// memory, skills, topics and locks beside the delivery features.
func TestNegotiationAdvertisesSharedData(t *testing.T) {
	e := startBroker(t, broker.Options{Dir: t.TempDir()}, noLimit)
	c := e.connect(e.member("alice"), "a")
	c.send(map[string]any{"type": "feature_negotiation_request", "require": []string{"client_message_id_dedupe"}})
	supported, _ := c.next("feature_negotiation_response")["supported"].(map[string]any)
	for _, name := range []string{FeatureState, FeatureMemory, FeatureSkills, FeatureTopics, FeatureLocks} {
		f, _ := supported[name].(map[string]any)
		params, _ := f["params"].(map[string]any)
		if params["version"] != float64(1) {
			t.Errorf("%s advertised as %v, want params.version 1", name, supported[name])
		}
	}
	if p := supported[FeatureSkills].(map[string]any)["params"].(map[string]any); p["publish"] != true ||
		p["max_content_bytes"] != float64(broker.MaxSkillContent) {
		t.Errorf("skills params = %v", p)
	}
}
