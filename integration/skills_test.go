package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestSkills: skills through the real binaries — `claudemesh skill` on
// alice's and bob's daemons, our broker between them. A publish is seen by
// the other daemon; publishing the name again replaces it with the next
// version; the query matches name and description in any case; refusals
// (a bad name, content over 64 KiB, another mesh) say what to do and
// change nothing; remove is idempotent. Both daemons' /v1/version show
// the shared-data abilities our broker advertised.
func TestSkills(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)
	skillCLI := func(p *e2ePeer, out any, args ...string) {
		t.Helper()
		r := runCLI(t, p.env, append([]string{"skill"}, args...)...)
		if r.code != 0 {
			t.Fatalf("%s: claudemesh skill %s: exit %d\nstdout %s\nstderr %s", p.name, strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		if out != nil {
			if err := json.Unmarshal([]byte(r.stdout), out); err != nil {
				t.Fatalf("claudemesh skill %s printed %q: %v", strings.Join(args, " "), r.stdout, err)
			}
		}
	}
	file := func(name, content string) string {
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	var v messages.Version
	if st, _, err := getJSON(alice.c, "http://localhost/v1/version", &v); err != nil || st != http.StatusOK {
		t.Fatalf("version: %d %v", st, err)
	}
	for _, f := range []string{"memory", "skills", "state", "topics", "client_message_id_dedupe"} {
		if !slices.Contains(v.BrokerFeaturesNegotiated, f) {
			t.Errorf("broker_features_negotiated %v lacks %s", v.BrokerFeaturesNegotiated, f)
		}
	}
	if !slices.Contains(v.IPCFeatures, "skills") {
		t.Errorf("ipc_features %v lacks skills", v.IPCFeatures)
	}

	var published messages.SkillAnswer
	skillCLI(alice, &published, "publish", "deploy", "--file", file("deploy.md", "1. tag\n2. push\n"),
		"--description", "Ship a Release", "--tag", "ops", "--tag", "release", "--json")
	if s := published.Skill; s.Version != 1 || s.Mesh != "demo" || s.PublishedBy != "alice" || s.PublishedByPubkey != alice.pubkey ||
		!slices.Equal(s.Tags, []string{"ops", "release"}) || s.Content != "1. tag\n2. push\n" {
		t.Fatalf("skill publish: %+v", published)
	}
	skillCLI(bob, nil, "publish", "review", "--file", file("review.md", "read every line"), "--description", "Review a PR")

	var list messages.SkillList
	skillCLI(bob, &list, "list", "--json")
	if len(list.Skills) != 2 || list.Skills[0].Name != "deploy" || list.Skills[1].Name != "review" || list.Skills[0].Content != "" {
		t.Fatalf("skill list: %+v", list)
	}
	skillCLI(bob, &list, "list", "rELEASE", "--json")
	if len(list.Skills) != 1 || list.Skills[0].Name != "deploy" {
		t.Fatalf("skill list rELEASE: %+v", list)
	}
	skillCLI(bob, &list, "list", "%", "--json")
	if len(list.Skills) != 0 {
		t.Fatalf("skill list %%: %+v; a query is text", list)
	}
	if r := runCLI(t, bob.env, "skill", "get", "deploy"); r.code != 0 || r.stdout != "1. tag\n2. push\n" {
		t.Fatalf("skill get deploy: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}

	// Any member may publish a skill: its terminal controls are shown as
	// escapes, its tabs and lines kept; --json keeps the exact text.
	hostile := "1. tag\n\t\x1b]0;pwned\x07push\n"
	skillCLI(alice, nil, "publish", "hostile", "--file", file("hostile.md", hostile))
	if r := runCLI(t, bob.env, "skill", "get", "hostile"); r.code != 0 || r.stdout != "1. tag\n\t\\x1b]0;pwned\\x07push\n" {
		t.Errorf("skill get hostile: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	var exact messages.SkillAnswer
	skillCLI(bob, &exact, "get", "hostile", "--json")
	if exact.Skill.Content != hostile {
		t.Errorf("skill get hostile --json: %+v", exact.Skill)
	}
	skillCLI(alice, nil, "remove", "hostile")

	skillCLI(bob, &published, "publish", "deploy", "-f", file("deploy2.md", "just push"), "--json")
	if s := published.Skill; s.Version != 2 || s.PublishedBy != "bob" || s.Description != "" || len(s.Tags) != 0 {
		t.Fatalf("republished: %+v; want version 2 by bob, replacing everything", published)
	}

	if r := runCLI(t, alice.env, "skill", "publish", "Deploy", "--file", file("x.md", "x")); r.code == 0 || !strings.Contains(r.stderr, "a-z") {
		t.Errorf("publish Deploy: exit %d\n%s%s; want a refusal that says what a name is", r.code, r.stdout, r.stderr)
	}
	big := file("big.md", strings.Repeat("x", 64<<10+1))
	if r := runCLI(t, alice.env, "skill", "publish", "deploy", "--file", big); r.code == 0 || !strings.Contains(r.stderr, "65536") {
		t.Errorf("publish of 64 KiB + 1: exit %d\n%s%s; want a refusal naming the limit", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, alice.env, "skill", "list", "--mesh", "elsewhere"); r.code == 0 || !strings.Contains(r.stderr, messages.CodeMeshNotAttached) {
		t.Errorf("skill list --mesh elsewhere: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var got messages.SkillAnswer
	skillCLI(alice, &got, "get", "deploy", "--json")
	if got.Skill.Version != 2 || got.Skill.Content != "just push" {
		t.Fatalf("deploy after the refusals: %+v", got)
	}

	var refusal messages.ErrorBody
	if st, _, err := getJSON(alice.c, "http://localhost/v1/skills/nope", &refusal); err != nil || st != http.StatusNotFound ||
		refusal.Error != messages.CodeSkillNotFound {
		t.Errorf("GET /v1/skills/nope: %d %v %+v; want 404 skill_not_found", st, err, refusal)
	}
	if st, _, err := getJSON(alice.c, "http://localhost/v1/skills/No%20pe", &refusal); err != nil || st != http.StatusBadRequest ||
		refusal.Error != messages.CodeInvalidSkill {
		t.Errorf("GET /v1/skills/No pe: %d %v %+v; want 400 invalid_skill", st, err, refusal)
	}

	var removed messages.SkillRemoved
	skillCLI(alice, &removed, "remove", "review", "--json")
	if !removed.Removed || removed.Name != "review" || removed.Mesh != "demo" {
		t.Fatalf("skill remove: %+v", removed)
	}
	skillCLI(alice, &removed, "remove", "review", "--json")
	if removed.Removed {
		t.Fatalf("second skill remove: %+v; want removed false", removed)
	}
	if r := runCLI(t, bob.env, "skill", "get", "review"); r.code == 0 || !strings.Contains(r.stderr, "skill list") {
		t.Errorf("skill get review after the remove: exit %d\n%s%s; want a failure that says how to list skills", r.code, r.stdout, r.stderr)
	}
}
