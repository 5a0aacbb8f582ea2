package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// gitRun runs git in dir with env and returns its output and exit code.
func gitRun(t *testing.T, dir string, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// cliIn runs the claudemesh CLI in dir with env.
func cliIn(t *testing.T, dir string, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// TestGuardCommits: a clone of one repository on each of two machines
// (two daemons of one mesh), the guard installed in both, alice's with a
// pre-commit hook of its own already there. Alice's agent session reserves
// src/** with `claudemesh reserve`: bob's session's commit touching
// src/app.py is refused naming alice's session and the pattern, and
// `claudemesh reserve src/app.py` there exits 3 naming her; alice's
// session's commit goes through, and her old hook still runs; her push
// goes through, bob's push of a commit made with --no-verify is refused
// by the pre-push hook; once alice releases, bob reserves; with bob's
// daemon stopped his commit goes through with a warning; uninstall puts
// alice's hook back as it was.
func TestGuardCommits(t *testing.T) {
	m := newE2EMesh(t)
	m.alice.start(t)
	m.bob.start(t)
	seed, origin := t.TempDir(), filepath.Join(t.TempDir(), "origin.git")
	env := os.Environ()
	gitRun(t, seed, env, "init", "-q")
	gitRun(t, seed, env, "commit", "-q", "--allow-empty", "-m", "root")
	gitRun(t, seed, env, "clone", "-q", "--bare", seed, origin)
	dirs := map[*e2ePeer]string{}
	for _, p := range []*e2ePeer{m.alice, m.bob} {
		dirs[p] = filepath.Join(t.TempDir(), p.name)
		if out, code := gitRun(t, origin, env, "clone", "-q", origin, dirs[p]); code != 0 {
			t.Fatal(out)
		}
	}
	own := "#!/bin/sh\necho ran > \"$(git rev-parse --git-dir)/own-hook-ran\"\n"
	ownPath := filepath.Join(dirs[m.alice], ".git", "hooks", "pre-commit")
	if err := os.WriteFile(ownPath, []byte(own), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, dir := range dirs {
		if r := cliIn(t, dir, p.env.environ(), "guard", "install"); r.code != 0 || !strings.Contains(r.stdout, "installed") {
			t.Fatalf("guard install for %s: exit %d\n%s%s", p.name, r.code, r.stdout, r.stderr)
		}
	}
	sessions := map[*e2ePeer]*agentSession{}
	sessEnv := map[*e2ePeer][]string{}
	for _, p := range []*e2ePeer{m.alice, m.bob} {
		sessions[p] = registerSession(t, p.env.socket(), "demo", p.name+"-session", p.name+"-editor")
		sessEnv[p] = append(p.env.environ(), "CLAUDEMESH_IPC_TOKEN="+sessions[p].token)
	}
	var r cliResult
	if err := wait.Until(startDeadline, "alice's reservation", func() bool {
		r = cliIn(t, dirs[m.alice], sessEnv[m.alice], "reserve", "src/**", "--ttl", "1m")
		return r.code == 0
	}); err != nil {
		t.Fatalf("%v: %s%s", err, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "reserved src/** (exclusive)") {
		t.Errorf("reserve: %s", r.stdout)
	}
	if err := wait.Until(startDeadline, "bob's session connected", func() bool {
		r = cliIn(t, dirs[m.bob], sessEnv[m.bob], "reservations")
		return r.code == 0
	}); err != nil {
		t.Fatalf("%v: %s", err, r.stderr)
	}
	if !strings.Contains(r.stdout, "src/**") || !strings.Contains(r.stdout, "alice-editor") {
		t.Errorf("bob's reservations list:\n%s", r.stdout)
	}
	if r = cliIn(t, dirs[m.bob], sessEnv[m.bob], "reserve", "src/app.py"); r.code != 3 || !strings.Contains(r.stderr, "alice-editor holds src/**") ||
		!strings.Contains(r.stderr, "--wait") {
		t.Errorf("bob's reserve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = cliIn(t, dirs[m.bob], sessEnv[m.bob], "reserve", "src/app.py", "--force"); r.code != 3 ||
		!strings.Contains(r.stderr, "not released by force: its holder renewed it lately") {
		t.Errorf("bob's reserve --force of a live holder's files: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"reserve", "a//b"}, {"release", "!x"}} { // usage errors, exit 2, as the exit codes say
		if r = cliIn(t, dirs[m.bob], sessEnv[m.bob], args...); r.code != 2 || !strings.Contains(r.stderr, "invalid_pattern") {
			t.Errorf("%s, a bad pattern: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	if r = cliIn(t, dirs[m.bob], sessEnv[m.bob], "reserve", "x", "--ttl", "2h"); r.code != 2 || !strings.Contains(r.stderr, "ttl") {
		t.Errorf("reserve --ttl 2h: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, ttl := range []string{"0s", "500us"} { // 0 ms would be the daemon's default, not what was asked
		if r = cliIn(t, dirs[m.bob], sessEnv[m.bob], "reserve", "x", "--ttl", ttl); r.code != 2 || !strings.Contains(r.stderr, "--ttl must be at least 1 second") {
			t.Errorf("reserve --ttl %s: exit %d\n%s%s", ttl, r.code, r.stdout, r.stderr)
		}
	}

	commit := func(p *e2ePeer, env []string, msg string) (string, int) {
		t.Helper()
		dir := dirs[p]
		if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "src", "app.py"), []byte(msg+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		gitRun(t, dir, env, "add", "src/app.py")
		return gitRun(t, dir, env, "commit", "-q", "-m", msg)
	}
	if out, code := commit(m.bob, sessEnv[m.bob], "bob's change"); code == 0 || !strings.Contains(out, "alice-editor") ||
		!strings.Contains(out, "src/**") || !strings.Contains(out, "src/app.py") {
		t.Errorf("bob's commit: exit %d\n%s", code, out)
	}
	// A name git allows and a pattern cannot name is not let through
	// unchecked while an exclusive reservation stands.
	odd := filepath.Join(dirs[m.bob], "src", "\xff.py")
	if err := os.WriteFile(odd, []byte("odd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, dirs[m.bob], sessEnv[m.bob], "reset", "-q")
	gitRun(t, dirs[m.bob], sessEnv[m.bob], "add", "src/\xff.py")
	if out, code := gitRun(t, dirs[m.bob], sessEnv[m.bob], "commit", "-q", "-m", "an odd name"); code == 0 ||
		!strings.Contains(out, `src/\xff.py cannot be checked`) {
		t.Errorf("bob's commit of a path that is not UTF-8: exit %d\n%s", code, out)
	}
	gitRun(t, dirs[m.bob], sessEnv[m.bob], "reset", "-q")
	if err := os.Remove(odd); err != nil {
		t.Fatal(err)
	}
	gitRun(t, dirs[m.bob], sessEnv[m.bob], "add", "src/app.py") // staged again, as the refused commit left it
	if out, code := commit(m.alice, sessEnv[m.alice], "alice's change"); code != 0 {
		t.Errorf("alice's commit: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dirs[m.alice], ".git", "own-hook-ran")); err != nil {
		t.Errorf("alice's own pre-commit hook did not run: %v", err)
	}
	if out, code := gitRun(t, dirs[m.alice], sessEnv[m.alice], "push", "-q", "origin", "HEAD"); code != 0 {
		t.Errorf("alice's push: exit %d\n%s", code, out)
	}
	gitRun(t, dirs[m.bob], sessEnv[m.bob], "commit", "-q", "--no-verify", "-m", "bob's change, unchecked")
	if out, code := gitRun(t, dirs[m.bob], sessEnv[m.bob], "push", "-q", "origin", "HEAD:bob"); code == 0 ||
		!strings.Contains(out, "push refused") || !strings.Contains(out, "alice-editor") {
		t.Errorf("bob's push of a commit touching src/app.py: exit %d\n%s", code, out)
	}

	if r = cliIn(t, dirs[m.bob], sessEnv[m.bob], "reserve", "src/app.py", "--json"); r.code != 3 || !strings.Contains(r.stdout, `"granted":false`) {
		t.Errorf("bob's reserve --json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = cliIn(t, dirs[m.alice], sessEnv[m.alice], "release"); r.code != 0 || r.stdout != "released src/**\n" {
		t.Errorf("alice's release: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = cliIn(t, dirs[m.bob], sessEnv[m.bob], "reserve", "src/app.py", "--shared"); r.code != 0 || !strings.Contains(r.stdout, "(shared)") {
		t.Errorf("bob's reserve after alice's release: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	m.bob.d.stop()
	out, code := commit(m.bob, sessEnv[m.bob], "bob's change, daemon down")
	if code != 0 || !strings.Contains(out, "warning: the daemon could not answer") {
		t.Errorf("bob's commit with the daemon stopped: exit %d\n%s", code, out)
	}

	if r = cliIn(t, dirs[m.alice], m.alice.env.environ(), "guard", "uninstall"); r.code != 0 {
		t.Fatalf("guard uninstall: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got, err := os.ReadFile(ownPath); err != nil || string(got) != own {
		t.Errorf("alice's hook after uninstall = %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dirs[m.alice], ".git", "hooks", "pre-push")); !os.IsNotExist(err) {
		t.Errorf("pre-push after uninstall: %v", err)
	}
}

// TestGuardSessionFromHook: an agent session of Claude Code with
// `claudemesh mcp` (no `claudemesh launch`): the SessionStart hook exports
// the session's token file into Claude Code's shell (CLAUDE_ENV_FILE), the
// daemon writes the token there when the session registers, and a command
// the agent runs with that environment acts as the session — its
// reservation is the session's, and the guard lets the session's own
// commit through while another session's reservation refuses it. The file
// goes when the session ends.
func TestGuardSessionFromHook(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	sess := registerSession(t, e.socket(), "local", "cc-sess-1", "claude-editor") // as claudemesh mcp does
	other := registerSession(t, e.socket(), "local", "other-sess", "other-editor")
	envFile := filepath.Join(t.TempDir(), "claude-env")
	hookEnv := *e
	hookEnv.extra = append(slices.Clone(e.extra), "CLAUDE_ENV_FILE="+envFile)
	runHook(t, &hookEnv, hookBinPath, "SessionStart", hookInput(t, "SessionStart", "cc-sess-1"))
	line, err := os.ReadFile(envFile)
	want := "export CLAUDEMESH_IPC_TOKEN_FILE='" + filepath.Join(e.daemonDir, "session-tokens", "cc-sess-1") + "'\n"
	if err != nil || string(line) != want {
		t.Fatalf("CLAUDE_ENV_FILE = %q, %v; want %q", line, err, want)
	}
	tokenFile := filepath.Join(e.daemonDir, "session-tokens", "cc-sess-1")
	if got, err := os.ReadFile(tokenFile); err != nil || strings.TrimSpace(string(got)) != sess.token {
		t.Fatalf("the token file = %q, %v", got, err)
	}
	agentEnv := append(e.environ(), "CLAUDEMESH_IPC_TOKEN_FILE="+tokenFile)

	repo := t.TempDir()
	gitRun(t, repo, os.Environ(), "init", "-q")
	gitRun(t, repo, os.Environ(), "commit", "-q", "--allow-empty", "-m", "root")
	if r := cliIn(t, repo, e.environ(), "guard", "install"); r.code != 0 {
		t.Fatalf("guard install: %s%s", r.stdout, r.stderr)
	}
	var r cliResult
	if err := wait.Until(startDeadline, "the session's reservation", func() bool {
		r = cliIn(t, repo, agentEnv, "reserve", "src/**", "--ttl", "1m")
		return r.code == 0
	}); err != nil {
		t.Fatalf("%v: %s", err, r.stderr)
	}
	if r = cliIn(t, repo, e.environ(), "reservations"); !strings.Contains(r.stdout, "claude-editor") {
		t.Errorf("the reservation is not the session's:\n%s%s", r.stdout, r.stderr)
	}
	if err := os.MkdirAll(filepath.Join(repo, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "src", "app.py"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, repo, agentEnv, "add", "src/app.py")
	otherEnv := append(e.environ(), "CLAUDEMESH_IPC_TOKEN="+other.token)
	if out, code := gitRun(t, repo, otherEnv, "commit", "-q", "-m", "other's"); code == 0 || !strings.Contains(out, "claude-editor") {
		t.Errorf("another session's commit: exit %d\n%s", code, out)
	}
	if out, code := gitRun(t, repo, agentEnv, "commit", "-q", "-m", "the session's"); code != 0 {
		t.Errorf("the session's own commit: exit %d\n%s", code, out)
	}
	if _, err := ipc.NewClient(e.socket()).DeregisterSession(context.Background(), sess.token); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tokenFile); !os.IsNotExist(err) {
		t.Errorf("the token file after the session ended: %v", err)
	}
	// A shell left with the ended session's token: the guard lets the
	// commit through, saying in the command line's words why it could not
	// check it.
	if err := os.WriteFile(filepath.Join(repo, "src", "app.py"), []byte("y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, repo, os.Environ(), "add", "src/app.py")
	staleEnv := append(e.environ(), "CLAUDEMESH_IPC_TOKEN="+sess.token)
	if out, code := gitRun(t, repo, staleEnv, "commit", "-q", "-m", "after the session"); code != 0 ||
		!strings.Contains(out, "session_unknown") || !strings.Contains(out, "unset CLAUDEMESH_IPC_TOKEN ") || strings.Contains(out, "/v1/") {
		t.Errorf("a commit with the ended session's token: exit %d\n%s", code, out)
	}
}
