package integration

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestMemory: the mesh's memory through the real binaries — `claudemesh
// remember`, `recall` and `forget` on alice's and bob's daemons, our
// broker between them. What alice remembers bob recalls, the exact phrase
// first, with who and when; tags filter; syntax in a query is text;
// forget is final and idempotent, and takes only an id of the form a
// broker mints; refusals store nothing.
func TestMemory(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)
	memoryCLI := func(p *e2ePeer, out any, args ...string) {
		t.Helper()
		r := runCLI(t, p.env, append(args, "--json")...)
		if r.code != 0 {
			t.Fatalf("%s: claudemesh %s: exit %d\nstdout %s\nstderr %s", p.name, strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		if err := json.Unmarshal([]byte(r.stdout), out); err != nil {
			t.Fatalf("claudemesh %s --json printed %q: %v", strings.Join(args, " "), r.stdout, err)
		}
	}
	recallIDs := func(p *e2ePeer, args ...string) []string {
		t.Helper()
		var res messages.MemoryMatches
		memoryCLI(p, &res, append([]string{"recall"}, args...)...)
		ids := []string{}
		for _, mm := range res.Matches {
			ids = append(ids, mm.ID)
		}
		return ids
	}

	var exact, partial messages.Remembered
	memoryCLI(alice, &partial, "remember", "the test of the deploy is flaky on Mondays", "--tag", "ops")
	memoryCLI(alice, &exact, "remember", "we fixed the flaky test by waiting for the server", "--tag", "ci", "--tag", "ops, infra")
	if len(exact.ID) != 32 || exact.Mesh != "demo" {
		t.Fatalf("remember: %+v", exact)
	}

	var found messages.MemoryMatches
	memoryCLI(bob, &found, "recall", "flaky test")
	if found.Mesh != "demo" || len(found.Matches) != 2 || found.Matches[0].ID != exact.ID || found.Matches[1].ID != partial.ID {
		t.Fatalf("bob's recall: %+v; want the exact phrase, then the partial match", found)
	}
	first := found.Matches[0]
	if first.RememberedByName != "alice" || len(first.RememberedBy) != 64 || first.RememberedAt == "" || first.Mesh != "demo" ||
		!slices.Equal(first.Tags, []string{"ci", "ops, infra"}) || first.Score <= 0 {
		t.Errorf("first match: %+v", first)
	}
	if ids := recallIDs(bob, "flaky", "--tag", "ops, infra"); !slices.Equal(ids, []string{exact.ID}) {
		t.Errorf("recall --tag 'ops, infra' = %v", ids)
	}
	if ids := recallIDs(bob, "flaky", "--limit", "1"); len(ids) != 1 {
		t.Errorf("recall --limit 1 = %v", ids)
	}
	if ids := recallIDs(bob, `'; DROP TABLE memory; -- "NEAR(*`); len(ids) != 0 {
		t.Errorf("recall of syntax = %v, want nothing", ids)
	}
	if r := runCLI(t, bob.env, "recall", "flaky test"); r.code != 0 || !strings.Contains(r.stdout, "by alice [ci, ops, infra]") ||
		!strings.Contains(r.stdout, "we fixed the flaky test") {
		t.Errorf("recall as text: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	for range 2 { // forget is idempotent
		var gone messages.Forgotten
		memoryCLI(bob, &gone, "forget", exact.ID)
		if !gone.OK || gone.ID != exact.ID || gone.Mesh != "demo" {
			t.Errorf("forget: %+v", gone)
		}
	}
	for _, p := range []*e2ePeer{alice, bob} {
		if ids := recallIDs(p, "flaky test"); !slices.Equal(ids, []string{partial.ID}) {
			t.Errorf("%s's recall after forget = %v", p.name, ids)
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"remember", strings.Repeat("x", messages.MaxMemoryBytes+1)}, messages.CodeInvalidMemory},
		{[]string{"remember", "  "}, messages.CodeInvalidMemory},
		{[]string{"remember", "ok", "--tag", ""}, messages.CodeInvalidMemory},
		{[]string{"recall", "x", "--limit", "101"}, messages.CodeInvalidMemory},
		{[]string{"remember", "elsewhere", "--mesh", "nope"}, messages.CodeMeshNotAttached},
		{[]string{"forget", strings.Repeat("m", 10_000)}, messages.CodeInvalidMemoryID},
		{[]string{"forget", "../../" + partial.ID}, messages.CodeInvalidMemoryID},
	} {
		r := runCLI(t, alice.env, c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("claudemesh %.60s: exit %d, stderr %q; want %s", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
	if ids := recallIDs(alice, ""); !slices.Equal(ids, []string{partial.ID}) {
		t.Errorf("memories after the refusals: %v, want only %s", ids, partial.ID)
	}

	// The upstream daemon's routes: DELETE /v1/memory?id= and a missing id.
	if r := do(t, alice.c, newRequest(t, http.MethodDelete, "http://localhost/v1/memory?id="+partial.ID, nil)); r.status != http.StatusOK {
		t.Errorf("DELETE /v1/memory?id=: %d %s", r.status, r.body)
	}
	if r := do(t, alice.c, newRequest(t, http.MethodDelete, "http://localhost/v1/memory", nil)); r.status != http.StatusBadRequest ||
		r.json(t)["error"] != messages.CodeInvalidMemory {
		t.Errorf("DELETE /v1/memory without an id: %d %s", r.status, r.body)
	}
	for _, bad := range []string{"/v1/memory/" + strings.Repeat("m", 10_000), "/v1/memory/..%2F..%2Fetc%2Fpasswd",
		"/v1/memory?id=" + partial.ID[:31] + "%00"} {
		if r := do(t, alice.c, newRequest(t, http.MethodDelete, "http://localhost"+bad, nil)); r.status != http.StatusBadRequest ||
			r.json(t)["error"] != messages.CodeInvalidMemoryID {
			t.Errorf("DELETE %.60s: %d %.200s", bad, r.status, r.body)
		}
	}
}
