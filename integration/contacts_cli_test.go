package integration

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
)

// TestContactPolicyCLI: what a recipient's contact policy did with a
// message reaches its sender on the command line, not only in the API's
// receipts. Rev (an agent of the same daemon) takes contacts only: the
// local agent's DM is held, and `inbox thread`, `inbox awaiting-ack` (both
// naming rev as its recipient) and `daemon outbox list` say by whom and
// until when; once rev accepts the
// request they say so; under block_all the next DM is refused, with the
// reason. Accepting a request nobody sent, or acknowledging no message, is
// refused in the command line's words.
func TestContactPolicyCLI(t *testing.T) {
	e, _ := localAgents(t, "rev")
	cli := func(args ...string) string {
		t.Helper()
		r := runCLI(t, e, args...)
		if r.code != 0 {
			t.Fatalf("claudemesh %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}
	// waitOut runs the command until its output matches want.
	waitOut := func(want string, args ...string) {
		t.Helper()
		re := regexp.MustCompile(want)
		var out string
		wait.For(t, e2eDeliverDeadline, strings.Join(args, " ")+" to say "+want, func() bool {
			out = runCLI(t, e, args...).stdout
			return re.MatchString(out)
		})
	}

	cli("contacts", "policy", "contacts_only", "--mesh", "rev")
	sent := cli("send", "--mesh", "local", "--ack", "--subject", "review", "--client-message-id", "held-1", "rev", "please review")
	if !strings.Contains(sent, "held-1") {
		t.Fatalf("send: %s", sent)
	}
	held := `held by rev as a contact request until 20\d\d-`
	waitOut(`sent to rev  \S+: please review  \[review\].*awaiting acknowledgement  `+held, "inbox", "thread", "held-1", "--mesh", "local")
	waitOut(`held-1  to rev  .*`+held, "inbox", "awaiting-ack", "--mesh", "local")
	waitOut(`held-1 .*done .*`+held, "daemon", "outbox", "list")
	// Rev sees the request's message asking for an acknowledgement it can
	// give only once it accepts.
	if out := cli("contacts", "requests", "--mesh", "rev"); !strings.Contains(out, "asks for an acknowledgement, once you accept the request") ||
		strings.Contains(out, "inbox ack") {
		t.Errorf("contacts requests: %s", out)
	}

	// The local agent's DM to rev made rev its contact, named as the peer
	// list names it (send resolved the name to the key it sent to).
	if out := cli("contacts", "list", "--mesh", "local"); !regexp.MustCompile(`(?m)^  rev +[0-9a-f]{64}  sent `).MatchString(out) {
		t.Errorf("contacts list of the sender: %s", out)
	}
	var listed messages.Contacts
	if err := json.Unmarshal([]byte(cli("contacts", "list", "--mesh", "local", "--json")), &listed); err != nil ||
		len(listed.Contacts) != 1 || listed.Contacts[0].Name != "rev" {
		t.Errorf("contacts list --json of the sender: %+v %v", listed, err)
	}
	cli("contacts", "accept", "local", "--mesh", "rev")
	waitOut(held+`\S+  accepted by rev as a contact`, "inbox", "thread", "held-1", "--mesh", "local")

	// Refusals in the command line's words, not the API's routes; an empty
	// id is a usage error (exit 2), never every thread's messages or a
	// route's name.
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"contacts", "accept", "nobody", "--mesh", "rev"}, 1, "no pending contact request from nobody; claudemesh contacts requests lists them"},
		{[]string{"inbox", "ack", "no-such-id"}, 1, "no such message in the inbox; give the id that claudemesh inbox --json prints"},
		{[]string{"inbox", "thread", "", "--mesh", "local"}, 2, "the thread id is empty"},
		{[]string{"inbox", "ack", ""}, 2, "the inbox id is empty"},
	} {
		r := runCLI(t, e, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.says) || strings.Contains(r.stderr, "/v1/") || r.stdout != "" {
			t.Errorf("claudemesh %q: exit %d\n%s%s", c.args, r.code, r.stdout, r.stderr)
		}
	}
	cli("contacts", "policy", "block_all", "--mesh", "rev")
	cli("send", "--mesh", "local", "--client-message-id", "refused-1", "rev", "anyone there?")
	waitOut(`refused-1 .*done .*refused by rev: `+regexp.QuoteMeta(messages.ReasonBlockAll),
		"daemon", "outbox", "list")
}
