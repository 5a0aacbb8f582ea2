package integration

import (
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

type mcpReservation struct {
	Pattern   string `json:"pattern"`
	Exclusive bool   `json:"exclusive"`
	Holder    string `json:"holder"`
	Yours     string `json:"yours"`
	Path      string `json:"path"`
}

type mcpReserveOut struct {
	Granted    bool             `json:"granted"`
	FenceToken int64            `json:"fence_token"`
	Conflicts  []mcpReservation `json:"conflicts"`
}

// TestMCPReservations: the reservation tools through `claudemesh mcp` as
// two agent sessions in one repository. Bob messages alice; alice's
// start_session reserves src/** and returns bob's message; bob's
// reserve_files of src/app.py is refused naming alice and her pattern,
// with force too (alice is not gone), saying so;
// bad arguments are tool errors that reserve nothing; once alice
// releases, bob is granted under a greater fence token.
func TestMCPReservations(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	a := startMCP(t, e, "alice", mcpOptions{})
	b := startMCP(t, e, "bob", mcpOptions{lean: true})
	a.waitPeer("bob")
	b.waitPeer("alice")
	b.sendUntilAccepted(map[string]any{"to": "alice", "message": "src is yours today", "client_message_id": "resv-hello"})

	var start struct {
		Mesh        string         `json:"mesh"`
		You         string         `json:"you"`
		Repo        string         `json:"repo"`
		Reservation *mcpReserveOut `json:"reservation"`
		Inbox       struct {
			Messages []struct {
				From string `json:"from"`
				Body string `json:"body"`
			} `json:"messages"`
		} `json:"inbox"`
	}
	wait.For(t, startDeadline, "bob's message in alice's start_session", func() bool {
		a.mustCall("start_session", map[string]any{"patterns": []string{"src/**"}, "summary": "refactoring src"}, &start)
		return len(start.Inbox.Messages) > 0 // bob's message was on its way
	})
	if start.You != "alice" || !strings.HasPrefix(start.Repo, "git:") || start.Reservation == nil || !start.Reservation.Granted ||
		len(start.Inbox.Messages) != 1 || start.Inbox.Messages[0].Body != "src is yours today" {
		t.Fatalf("alice's start_session: %+v", start)
	}

	var got mcpReserveOut
	res := b.mustCall("reserve_files", map[string]any{"patterns": []string{"src/app.py"}}, &got)
	if got.Granted || len(got.Conflicts) != 1 || got.Conflicts[0].Holder != "alice" || got.Conflicts[0].Pattern != "src/**" ||
		!strings.Contains(text(res), "alice holds src/**") || !strings.Contains(text(res), "(call again with wait_seconds)") {
		t.Fatalf("bob's reserve_files: %+v, %q", got, text(res))
	}
	// Force releases only a holder gone a while; alice renews hers, and the
	// refusal says why force did nothing.
	if res := b.mustCall("reserve_files", map[string]any{"patterns": []string{"src/app.py"}, "force": true}, &got); got.Granted ||
		!strings.Contains(text(res), "alice holds src/**") || !strings.Contains(text(res), "not released by force: its holder renewed it lately") {
		t.Fatalf("bob's reserve_files with force: %+v, %q", got, text(res))
	}
	// start_session takes no wait_seconds: its refusal points to the tool that does.
	if res := b.mustCall("start_session", map[string]any{"patterns": []string{"src/app.py"}}, nil); !strings.Contains(text(res),
		"alice holds src/**") || !strings.Contains(text(res), "(call reserve_files with wait_seconds)") {
		t.Fatalf("bob's start_session: %q", text(res))
	}
	for _, args := range []map[string]any{{"patterns": []string{}}, {"patterns": []string{"a//b"}}, {"patterns": []string{"!x"}},
		{"patterns": []string{"x"}, "wait_seconds": -1}, {"patterns": []string{"x"}, "ttl_seconds": 7200}} {
		if res := b.call("reserve_files", args); !res.IsError {
			t.Errorf("reserve_files(%v) is not a tool error: %q", args, text(res))
		}
	}
	var list struct {
		Reservations []mcpReservation `json:"reservations"`
	}
	res = b.mustCall("list_reservations", map[string]any{}, &list)
	if len(list.Reservations) != 1 || list.Reservations[0].Holder != "alice" || !strings.HasPrefix(text(res), "1 reservation:\nsrc/** (exclusive) held by alice until ") {
		t.Errorf("list_reservations: %+v %q", list, text(res))
	}
	var rel struct {
		Released []string `json:"released"`
	}
	a.mustCall("release_files", map[string]any{}, &rel)
	if len(rel.Released) != 1 || rel.Released[0] != "src/**" {
		t.Errorf("alice's release_files: %+v", rel)
	}
	var again mcpReserveOut
	b.mustCall("reserve_files", map[string]any{"patterns": []string{"src/app.py"}}, &again)
	if !again.Granted || again.FenceToken <= start.Reservation.FenceToken {
		t.Errorf("bob after alice released: %+v (alice's token %d)", again, start.Reservation.FenceToken)
	}
}
