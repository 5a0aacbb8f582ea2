package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// TestProfileOversizedFieldRefused: POST /v1/profile with a 300 KB summary
// is refused with a 400 naming the field and its limit before anything
// reaches the broker (a frame that large made the broker close the
// connection with 1009 while the daemon answered 200 applied): the profile
// is unchanged, the mesh connection stays up, and the next profile change
// goes through on it. `claudemesh profile` shows and sets the profile.
func TestProfileOversizedFieldRefused(t *testing.T) {
	m := newE2EMesh(t)
	bob := m.bob
	bob.start(t)
	post := func(body string) *response {
		t.Helper()
		return do(t, bob.c, newRequest(t, http.MethodPost, "http://localhost/v1/profile", []byte(body)))
	}
	summary := func() string {
		t.Helper()
		var own struct {
			Profiles []struct {
				Summary string `json:"summary"`
			} `json:"profiles"`
		}
		if st, _, err := getJSON(bob.c, "http://localhost/v1/profile?mesh=demo", &own); err != nil || st != http.StatusOK ||
			len(own.Profiles) != 1 {
			t.Fatalf("GET /v1/profile: %d %v %+v", st, err, own)
		}
		return own.Profiles[0].Summary
	}
	if r := post(`{"summary":"before"}`); r.status != http.StatusOK {
		t.Fatalf("a small summary: %d %s", r.status, r.body)
	}
	wait.For(t, e2eDeliverDeadline, "the broker to list the first summary", func() bool { return summary() == "before" })

	r := post(`{"status":"dnd","summary":"` + strings.Repeat("x", 300<<10) + `"}`)
	var eb struct{ Error, Detail string }
	if json.Unmarshal(r.body, &eb); r.status != http.StatusBadRequest || eb.Error != "profile_field_too_long" ||
		!strings.Contains(eb.Detail, "summary") || !strings.Contains(eb.Detail, "4096 bytes") {
		t.Fatalf("a 300 KB summary: %d %.300s", r.status, r.body)
	}
	if !bob.connected() {
		t.Fatalf("the mesh connection is down after the refused profile; stderr:\n%s", bob.d.stderr)
	}
	if got := summary(); got != "before" {
		t.Fatalf("summary after the refused change: %.40q", got)
	}
	if r := runCLI(t, bob.env, "profile", "--summary", "after", "--status", "working"); r.code != 0 ||
		r.stdout != "set status, summary on demo\n" {
		t.Fatalf("claudemesh profile --summary: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wait.For(t, e2eDeliverDeadline, "the broker to list the second summary", func() bool { return summary() == "after" })
	if r := runCLI(t, bob.env, "profile"); r.code != 0 || !strings.Contains(r.stdout, "mesh demo") ||
		!strings.Contains(r.stdout, "summary:  after") || !strings.Contains(r.stdout, "status:   working") {
		t.Fatalf("claudemesh profile: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, bob.env, "profile", "--summary", strings.Repeat("y", 5000)); r.code != 2 ||
		!strings.Contains(r.stderr, "summary is 5000 bytes; the limit is 4096 bytes") {
		t.Fatalf("claudemesh profile with a long summary: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if recs := logRecords(bob.d.stderr.String(), "broker_disconnected"); len(recs) != 0 {
		t.Fatalf("the broker connection dropped: %v", recs)
	}
}
