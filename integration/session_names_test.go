package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// TestSessionNamesDoNotCrossMembers, with two daemons on one broker: a
// session name belongs to the member whose session took it. Bob's daemon
// is refused alice's session's name — and a look-alike — with 409
// display_name_taken, storing nothing, also once alice's session has
// ended; so alice's `claudemesh send planner` never reaches bob's key.
func TestSessionNamesDoNotCrossMembers(t *testing.T) {
	m := newE2EMesh(t)
	m.alice.start(t)
	m.bob.start(t)
	ctx := context.Background()
	planner := registerSession(t, m.alice.env.socket(), "demo", "alice-planner", "planner")
	bob := ipc.NewClient(m.bob.env.socket())
	for _, name := range []string{"planner", "PLАNNER"} { // the second with a Cyrillic А
		_, err := register(ctx, bob, "demo", "bob-"+strings.ToLower(name[:2]), name, os.Getpid())
		var me *messages.Error
		if !errors.As(err, &me) || me.Status != 409 || me.Code != messages.CodeDisplayNameTaken {
			t.Fatalf("bob's session %q: %v, want 409 display_name_taken", name, err)
		}
	}
	if list, err := bob.Sessions(ctx); err != nil || len(list) != 0 {
		t.Fatalf("bob's sessions after the refusals: %+v, %v; want none stored", list, err)
	}
	if _, err := ipc.NewClient(m.alice.env.socket()).DeregisterSession(ctx, planner.token); err != nil {
		t.Fatal(err)
	}
	if _, err := register(ctx, bob, "demo", "bob-pl", "planner", os.Getpid()); err == nil {
		t.Fatal("bob's session took planner once alice's had ended")
	}
	r := runCLI(t, m.alice.env, "send", "planner", "the deploy key is X")
	if r.code == 0 {
		t.Errorf("alice's send to planner after her session ended: exit 0\n%s", r.stdout)
	}
}

// TestSessionIDNotTakenOver: a live session's id is registered again only
// with its own token — another token is refused 409 session_in_use and
// the session's token keeps working — or once its process is gone.
func TestSessionIDNotTakenOver(t *testing.T) {
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	ctx := context.Background()
	c := ipc.NewClient(e.socket())
	agent := exec.Command("sleep", "60")
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer agent.Process.Kill()
	victim, err := register(ctx, c, "local", "victim", "victim", agent.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	var me *messages.Error
	if _, err := register(ctx, c, "local", "victim", "victim", agent.Process.Pid); !errors.As(err, &me) || me.Status != 409 ||
		me.Code != messages.CodeSessionInUse {
		t.Fatalf("registering a live session's id with another token: %v, want 409 session_in_use", err)
	}
	if _, err := c.AsSession(victim).Peers(ctx, ""); err != nil {
		t.Fatalf("the victim's token after the attempt: %v", err)
	}
	if _, err := c.RegisterSession(ctx, &messages.RegisterSession{Token: victim, SessionID: "victim", Mesh: "local",
		DisplayName: "victim", PID: agent.Process.Pid, Cwd: "/work"}); err != nil {
		t.Fatalf("the session registering again with its own token: %v", err)
	}
	agent.Process.Kill()
	agent.Wait()
	if err := wait.Until(10*time.Second, "the id free once its process is gone", func() bool {
		_, err := register(ctx, c, "local", "victim", "victim", os.Getpid())
		return err == nil
	}); err != nil {
		t.Fatal(err)
	}
}

// register registers a session with a fresh token and returns the token.
func register(ctx context.Context, c *ipc.Client, mesh, id, name string, pid int) (string, error) {
	b := make([]byte, 32)
	rand.Read(b)
	tok := hex.EncodeToString(b)
	_, err := c.RegisterSession(ctx, &messages.RegisterSession{Token: tok, SessionID: id, Mesh: mesh, DisplayName: name, PID: pid,
		Cwd: "/work"})
	return tok, err
}
