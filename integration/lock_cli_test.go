package integration

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
)

// TestLockCLI: `claudemesh lock` against a real daemon (embedded broker),
// run in a git repository of its own: acquire prints the fence token, and
// says how to keep a lock taken outside a session; a lock an agent session
// holds exits 3 naming the holder; --repo . is the repository's id (its
// root commit), which the session's lock of the same key in that id
// collides with; list and release; bad flags exit 1 with the reason and
// lock nothing.
func TestLockCLI(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	repo := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "root"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	root, err := exec.Command("git", "-C", repo, "rev-list", "--max-parents=0", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	repoID := "git:" + strings.TrimSpace(string(root))
	lockCLI := func(args ...string) cliResult {
		t.Helper()
		cmd := exec.CommandContext(context.Background(), binPath, append([]string{"lock"}, args...)...)
		cmd.Env, cmd.Dir = e.environ(), repo
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
	}

	r := lockCLI("acquire", "release-branch", "--ttl", "1m")
	if r.code != 0 || !regexp.MustCompile(`^granted release-branch: fence token \d+, expires \S+ \(mesh local\)\nnot in an agent session: renew it`).MatchString(r.stdout) {
		t.Fatalf("acquire: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	agent := registerSession(t, e.socket(), "local", "sess-1", "editor")
	wait.For(t, startDeadline, "the session connected", func() bool {
		_, err := agent.c.Locks(context.Background(), "", "")
		return err == nil
	})
	got, err := agent.c.AcquireLock(context.Background(), &messages.LockAcquireRequest{Key: "file:src/lib.rs", Repo: repoID})
	if err != nil || !got.Granted {
		t.Fatalf("the session's acquire: %+v, %v", got, err)
	}
	r = lockCLI("acquire", "file:src/lib.rs", "--repo", ".")
	if r.code != 3 || !strings.Contains(r.stderr, "file:src/lib.rs (repo "+repoID+") is held by editor") ||
		!strings.Contains(r.stderr, "wait for it with --wait") {
		t.Errorf("acquire of the session's lock: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = lockCLI("acquire", "file:src/lib.rs"); r.code != 0 {
		t.Errorf("the same key mesh-wide: exit %d\n%s", r.code, r.stderr)
	}
	r = lockCLI("list", "--repo", ".")
	if r.code != 0 || !strings.Contains(r.stdout, "file:src/lib.rs") || !strings.Contains(r.stdout, "editor") || strings.Contains(r.stdout, "release-branch") {
		t.Errorf("list --repo .: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = lockCLI("list", "--json"); r.code != 0 || strings.Count(r.stdout, `"key"`) != 3 {
		t.Errorf("list --json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = lockCLI("release", "release-branch"); r.code != 0 || r.stdout != "released release-branch\n" {
		t.Errorf("release: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = lockCLI("release", "release-branch"); r.code != 0 || !strings.Contains(r.stdout, "was not held by you") {
		t.Errorf("release again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = lockCLI("renew", "file:src/lib.rs", "--repo", ".", "--fence", "1"); r.code != 3 || !strings.Contains(r.stderr, "lock_not_held") &&
		!strings.Contains(r.stderr, "not held") {
		t.Errorf("renew of another's lock: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, bad := range [][]string{{"acquire", "k", "--ttl", "10ms"}, {"acquire", "k", "--wait", "1h"}, {"acquire", "a\x01b"}} {
		if r = lockCLI(bad...); r.code != 1 || !strings.Contains(r.stderr, "invalid_lock") {
			t.Errorf("%q: exit %d\n%s%s", bad, r.code, r.stdout, r.stderr)
		}
	}
	if r = lockCLI("acquire", "k", "--ttl", "0s"); r.code != 2 || !strings.Contains(r.stderr, "--ttl must be at least 1 second") {
		t.Errorf("acquire --ttl 0s (0 ms would be the default): exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = lockCLI("list", "--json"); strings.Count(r.stdout, `"key"`) != 2 {
		t.Errorf("locks after the bad input:\n%s", r.stdout)
	}
}
