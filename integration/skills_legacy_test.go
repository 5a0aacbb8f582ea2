package integration

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestSkillsLegacyBroker: a daemon on a broker that speaks only the
// upstream protocol lists and reads skills (upstream has list_skills and
// get_skill), records none of our broker's abilities, and a publish, which
// upstream does not answer, ends in a 504 broker_timeout that says what to
// do rather than a hang.
func TestSkillsLegacyBroker(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	m.restartBrokerWith("--legacy-protocol")
	alice := m.alice
	alice.startLegacy(t)

	var v messages.Version
	if st, _, err := getJSON(alice.c, "http://localhost/v1/version", &v); err != nil || st != http.StatusOK ||
		slices.Contains(v.BrokerFeaturesNegotiated, "skills") {
		t.Fatalf("version on the legacy broker: %d %v %v; want no skills ability", st, err, v.BrokerFeaturesNegotiated)
	}
	var list messages.SkillList
	if st, _, err := getJSON(alice.c, "http://localhost/v1/skills", &list); err != nil || st != http.StatusOK || len(list.Skills) != 0 {
		t.Fatalf("GET /v1/skills on the legacy broker: %d %v %+v", st, err, list)
	}
	var refusal messages.ErrorBody
	if st, _, err := getJSON(alice.c, "http://localhost/v1/skills/deploy", &refusal); err != nil || st != http.StatusNotFound ||
		refusal.Error != messages.CodeSkillNotFound {
		t.Fatalf("GET /v1/skills/deploy on the legacy broker: %d %v %+v", st, err, refusal)
	}
	r := runCLI(t, alice.env, "skill", "publish", "deploy", "--file", "/dev/null")
	if r.code == 0 || !strings.Contains(r.stderr, "content") {
		t.Errorf("publish of an empty file: exit %d\n%s%s; want a refusal before the broker is asked", r.code, r.stdout, r.stderr)
	}
	st := do(t, alice.c, newRequest(t, http.MethodPost, "http://localhost/v1/skills", []byte(`{"name":"deploy","content":"push"}`)))
	if body := st.json(t); st.status != http.StatusGatewayTimeout || body["error"] != messages.CodeBrokerTimeout ||
		!strings.Contains(body["detail"].(string), "retry") {
		t.Fatalf("publish on the legacy broker: %d %v; want 504 broker_timeout", st.status, body)
	}
}
