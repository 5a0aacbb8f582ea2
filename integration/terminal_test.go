package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// hostileBody sets the terminal's title, clears the screen and returns
// the cursor to overwrite the line, when printed raw.
const hostileBody = "\x1b]0;pwned\x07\x1b[2J…\rfake line"

// TestHostileTextIsEscaped: a DM made of terminal escapes and a peer
// summary with bidi overrides reach the operator's terminal escaped — in
// `daemon inbox`, `inbox` (inside the recipient's session), `peers` and
// `sessions` — and exact in --json; a session name with them is refused
// at registration.
func TestHostileTextIsEscaped(t *testing.T) {
	e := newEnv(t)
	if err := os.Remove(e.configDir + "/config.json"); err != nil { // the embedded broker's local mesh, made at start
		t.Fatal(err)
	}
	d := startDaemon(t, e, "--no-tcp")
	defer d.stop()
	const evilName = "evil"
	ant := registerSession(t, e.socket(), "local", "sess-ant", "ant")
	var refused *messages.Error
	if _, err := register(context.Background(), ipc.NewClient(e.socket()), "local", "sess-bidi", "ev\u202eil\u2066", os.Getpid()); !errors.As(err, &refused) ||
		refused.Status != 400 {
		t.Errorf("a session named with bidi overrides: %v, want 400", err)
	}
	evil := registerSession(t, e.socket(), "local", "sess-evil", evilName)
	summary := "\u202egnp.exe"
	wait.For(t, e2eConnectDeadline, "evil's summary set", func() bool {
		_, err := evil.c.SetProfile(context.Background(), &messages.SetProfile{Summary: &summary})
		return err == nil // broker_unavailable until the session's connection is up
	})
	wait.For(t, e2eConnectDeadline, "evil listed with its summary", func() bool {
		peers, err := ant.c.Peers(context.Background(), "")
		return err == nil && slices.ContainsFunc(peers, func(p ipc.MeshPeer) bool { return p.DisplayName == evilName && p.Summary == summary })
	})
	send(t, evil, ant.pubkey, hostileBody)
	wait.For(t, e2eDeliverDeadline, "ant's message", func() bool {
		page, err := ant.c.Inbox(context.Background(), url.Values{"mark_seen": {"false"}})
		return err == nil && len(page.Items) == 1
	})
	tokFile := e.configDir + "/ant-token"
	if err := os.WriteFile(tokFile, []byte(ant.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inAnt := withEnv(e, "CLAUDEMESH_IPC_TOKEN_FILE="+tokFile)

	escaped := `\x1b]0;pwned\x07\x1b[2J…\rfake line`
	for _, run := range []struct {
		name string
		env  *env
		args []string
	}{
		{"daemon inbox", e, []string{"daemon", "inbox"}},
		{"inbox inside ant", inAnt, []string{"inbox"}},
	} {
		r := runCLI(t, run.env, run.args...)
		if r.code != 0 || !strings.Contains(r.stdout, ": "+escaped+"\n") {
			t.Errorf("%s: exit %d, want the body escaped\n%q\n%s", run.name, r.code, r.stdout, r.stderr)
		}
		assertNoTerminalControls(t, run.name, r.stdout)

		r = runCLI(t, run.env, append(run.args, "--json")...)
		var it messages.InboxItem
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &it); err != nil || r.code != 0 || messages.Deref(it.Body) != hostileBody {
			t.Errorf("%s --json: exit %d, %v, want the body exactly\n%q", run.name, r.code, err, r.stdout)
		}
	}
	for _, args := range [][]string{{"peers"}, {"sessions"}} {
		for _, who := range []*env{e, inAnt} {
			if args[0] == "sessions" && who == inAnt {
				continue
			}
			r := runCLI(t, who, args...)
			if r.code != 0 || !strings.Contains(r.stdout, evilName) {
				t.Errorf("%s: exit %d, want evil listed\n%q\n%s", args[0], r.code, r.stdout, r.stderr)
			}
			if args[0] == "peers" && !strings.Contains(r.stdout, `\u202egnp.exe`) {
				t.Errorf("peers: want the summary escaped\n%q", r.stdout)
			}
			assertNoTerminalControls(t, args[0], r.stdout)
		}
	}
	r := runCLI(t, inAnt, "peers", "--json")
	var peers []ipc.MeshPeer
	if err := json.Unmarshal([]byte(r.stdout), &peers); err != nil || !slices.ContainsFunc(peers, func(p ipc.MeshPeer) bool {
		return p.DisplayName == evilName && p.Summary == summary
	}) {
		t.Errorf("peers --json: %v, want the name and summary exactly\n%q", err, r.stdout)
	}
}

// assertNoTerminalControls fails when out holds a byte or character a
// terminal acts on (a newline ends a line and is allowed) or a bidi
// control.
func assertNoTerminalControls(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		if r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
			t.Errorf("%s printed %U raw:\n%q", what, r, out)
			return
		}
	}
}
