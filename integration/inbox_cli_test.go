package integration

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
)

// TestDaemonInboxCommand: `claudemesh daemon inbox` prints what an agent
// received (text and JSON, one mesh with --mesh), refuses a bad --since,
// and with -f goes on printing what arrives, each message once, until
// interrupted.
func TestDaemonInboxCommand(t *testing.T) {
	e, d := localAgents(t, "rev")
	send := func(body string) {
		t.Helper()
		if r := runCLI(t, e, "send", "--mesh", "local", "*", body); r.code != 0 {
			t.Fatalf("send %s: %d %s", body, r.code, r.stderr)
		}
	}
	send("first")
	wait.For(t, e2eDeliverDeadline, "the first message in rev's inbox", func() bool {
		return strings.Contains(runCLI(t, e, "daemon", "inbox", "--mesh", "rev").stdout, "first")
	})
	r := runCLI(t, e, "daemon", "inbox", "--mesh", "rev", "--json")
	var it messages.InboxItem
	if r.code != 0 || json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &it) != nil || it.Mesh != "rev" ||
		it.Topic != "*" || it.Body == nil || *it.Body != "first" {
		t.Fatalf("daemon inbox --json: exit %d\n%s", r.code, r.stdout)
	}
	if r := runCLI(t, e, "daemon", "inbox", "--since", "yesterday"); r.code != 2 || !strings.Contains(r.stderr, "--since") {
		t.Errorf("a bad --since: exit %d %s", r.code, r.stderr)
	}
	if r := runCLI(t, e, "inbox", "search", "first", "--mesh", "rev"); r.code != 0 || !strings.HasSuffix(strings.TrimSpace(r.stdout), ": first") {
		t.Errorf("inbox search first: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, e, "inbox", "search", "!!"); r.code != 2 || !strings.Contains(r.stderr, "give a word to search for") {
		t.Errorf("inbox search with no word: exit %d %s", r.code, r.stderr)
	}
	// --from names the sender as send names a recipient: its name, a pubkey
	// prefix or the pubkey; one that names no peer is a usage error.
	for _, from := range []string{"local", it.SenderPubkey[:10], it.SenderPubkey} {
		if r := runCLI(t, e, "inbox", "--mesh", "rev", "--from", from); r.code != 0 || !strings.HasSuffix(strings.TrimSpace(r.stdout), "local: first") {
			t.Errorf("inbox --from %s: exit %d %s%s", from, r.code, r.stdout, r.stderr)
		}
	}
	if r := runCLI(t, e, "inbox", "--mesh", "rev", "--from", "rev"); r.code != 0 || !strings.HasPrefix(r.stdout, "no messages since") {
		t.Errorf("inbox --from rev (who sent nothing): exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, e, "inbox", "--from", "nobody"); r.code != 2 || !strings.Contains(r.stderr, `no peer matches "nobody" on any mesh`) ||
		!strings.Contains(r.stderr, "rev (") {
		t.Errorf("inbox --from nobody: exit %d %s", r.code, r.stderr)
	}

	follow, lines := startCLILines(t, e, "daemon", "inbox", "--mesh", "rev", "-f")
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("daemon inbox -f ended")
			}
			return l
		case <-time.After(e2eDeliverDeadline):
			t.Fatal("daemon inbox -f printed nothing")
			return ""
		}
	}
	if l := next(); !strings.Contains(l, "  *  ") || !strings.HasSuffix(l, ": first") { // the window: its stream is open
		t.Fatalf("first line of -f: %q", l)
	}
	send("second")
	if l := next(); !strings.HasSuffix(l, ": second") {
		t.Fatalf("live line of -f: %q", l)
	}
	if err := follow.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		t.Errorf("after the interrupt -f printed %q", l)
	}
	if err := follow.Wait(); err != nil {
		t.Errorf("daemon inbox -f after SIGINT: %v", err)
	}

	// A follower whose daemon stops says so and fails.
	second := exec.Command(binPath, "daemon", "inbox", "-f")
	second.Env = e.environ()
	stdout, err := second.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	second.Stderr = &stderr
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Process.Kill(); second.Wait() })
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() { // the window printed: its stream is open
		t.Fatal("the second follower printed nothing")
	}
	d.stop()
	for sc.Scan() {
	}
	if err := second.Wait(); err == nil || !strings.Contains(stderr.String(), "could not be resumed") {
		t.Errorf("follower after the daemon stopped: %v, stderr %q", err, stderr.String())
	}
	t.Log("checked: daemon inbox lists, filters by mesh and by a sender named as send names one, prints JSON, " +
		"refuses a bad --since and an unknown sender, follows without repeating, " +
		"and a follower fails when its daemon stops")
}

// localAgents starts a daemon of a fresh environment with the embedded
// broker's local mesh only, and on it the local agent and one added
// agent, name; it returns once both are connected.
func localAgents(t *testing.T, name string) (*env, *daemonProc) {
	t.Helper()
	e := newEnv(t)
	if err := os.Remove(filepath.Join(e.configDir, "config.json")); err != nil { // the embedded local mesh
		t.Fatal(err)
	}
	if r := runCLI(t, e, "daemon", "add-agent", name); r.code != 0 {
		t.Fatalf("add-agent: %d %s", r.code, r.stderr)
	}
	d := startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	wait.For(t, e2eConnectDeadline, "both agents on the embedded broker", func() bool {
		var h messages.Health
		getJSON(c, "http://localhost/v1/health", &h)
		return len(h.Meshes) == 2 && h.Meshes[0].Connected && h.Meshes[1].Connected
	})
	return e, d
}
