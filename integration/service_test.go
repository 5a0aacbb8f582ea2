package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/deploy"
)

// serviceEnv is a sandbox for install-service: a temp HOME, an empty PATH
// directory (so no systemctl or launchctl runs) and an environment with
// every CI and container variable removed.
type serviceEnv struct {
	t    *testing.T
	home string
	// force is --force when this host itself (its files or euid: we are
	// often root in a container) would be refused; the environment is
	// clean either way.
	force []string
}

func newServiceEnv(t *testing.T) *serviceEnv {
	t.Helper()
	s := &serviceEnv{t: t, home: t.TempDir()}
	if f := deploy.Detect(deploy.Probe{Root: "/", EUID: os.Geteuid()}); len(f) > 0 {
		t.Logf("this host would be refused (%v): passing --force where a refusal is not under test", f)
		s.force = []string{"--force"}
	}
	return s
}

// environ is os.Environ without CI/container variables, CLAUDEMESH_*,
// HOME, XDG_CONFIG_HOME and PATH, plus the sandbox's and extra.
func (s *serviceEnv) environ(extra ...string) []string {
	drop := append(append([]string{"HOME", "XDG_CONFIG_HOME", "PATH"}, deploy.CIEnvVars...), deploy.ContainerEnvVars...)
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(drop, name) && !strings.HasPrefix(name, "CLAUDEMESH_") {
			out = append(out, kv)
		}
	}
	emptyPath := filepath.Join(s.home, "empty-path")
	if err := os.MkdirAll(emptyPath, 0o755); err != nil {
		s.t.Fatal(err)
	}
	return append(append(out, "HOME="+s.home, "PATH="+emptyPath), extra...)
}

func (s *serviceEnv) run(env []string, args ...string) cliResult {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		s.t.Fatalf("claudemesh %s: %v", strings.Join(args, " "), err)
	}
	if ctx.Err() != nil {
		s.t.Fatalf("claudemesh %s: still running after %s", strings.Join(args, " "), cliDeadline)
	}
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// unitPath is where this OS's service file goes in the sandbox.
func (s *serviceEnv) unitPath() string {
	s.t.Helper()
	p, err := deploy.UnitPath(deploy.Inputs{GOOS: runtime.GOOS, Home: s.home})
	if err != nil {
		s.t.Fatalf("this OS has no service manager install-service supports: %v", err)
	}
	return p
}

// files lists everything under HOME except the empty PATH directory.
func (s *serviceEnv) files() []string {
	var out []string
	_ = filepath.WalkDir(s.home, func(p string, d fs.DirEntry, err error) error {
		if p != s.home && d.Name() != "empty-path" {
			out = append(out, p)
		}
		return err
	})
	return out
}

// resolvedBin is binPath as the service must name it: absolute, symlinks
// resolved.
func resolvedBin(t *testing.T) string {
	t.Helper()
	p, err := filepath.EvalSymlinks(binPath)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (s *serviceEnv) args(args ...string) []string {
	return append(args, s.force...)
}

// TestInstallServiceDryRun: with no CI in the environment, --dry-run prints
// the unit naming the absolute binary and the commands, and writes nothing.
func TestInstallServiceDryRun(t *testing.T) {
	s := newServiceEnv(t)
	s.unitPath()
	r := s.run(s.environ(), s.args("daemon", "install-service", "--dry-run")...)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	bin := resolvedBin(t)
	var want []string
	switch runtime.GOOS {
	case "linux":
		want = []string{"ExecStart=" + bin + " daemon up --foreground", "Type=notify", "systemctl --user daemon-reload",
			"systemctl --user enable --now claudemesh-daemon.service", s.unitPath()}
	case "darwin":
		want = []string{"<string>" + bin + "</string>", "launchctl bootstrap", s.unitPath()}
	}
	for _, w := range want {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("dry run output lacks %q:\n%s", w, r.stdout)
		}
	}
	if f := s.files(); len(f) != 0 {
		t.Errorf("--dry-run created %v", f)
	}

	// --json: one object with the full file content and the commands.
	r = s.run(s.environ("CLAUDEMESH_DAEMON_DIR="+filepath.Join(s.home, "cm d")), s.args("daemon", "install-service", "--dry-run", "--json")...)
	if r.code != 0 {
		t.Fatalf("--json: exit %d: %s", r.code, r.stderr)
	}
	var doc struct {
		Action, State, Path string
		DryRun              bool `json:"dry_run"`
		Files               []struct{ Path, Mode, Content string }
		Commands            []struct {
			Argv []string
			Ran  bool
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("--json output is not one JSON object: %v\n%s", err, r.stdout)
	}
	if doc.Action != "install" || !doc.DryRun || doc.State != "new" || doc.Path != s.unitPath() ||
		len(doc.Files) != 1 || doc.Files[0].Mode != "0644" || !strings.Contains(doc.Files[0].Content, bin) ||
		!strings.Contains(doc.Files[0].Content, "CLAUDEMESH_DAEMON_DIR") || len(doc.Commands) == 0 || doc.Commands[0].Ran {
		t.Errorf("--json document: %+v", doc)
	}
	if f := s.files(); len(f) != 0 {
		t.Errorf("--dry-run --json created %v", f)
	}
}

// TestInstallServiceBinaryFlag: --binary names the executable as given
// (quoted for systemd when it has a space); a relative or missing one is a
// usage error (exit 2).
func TestInstallServiceBinaryFlag(t *testing.T) {
	s := newServiceEnv(t)
	s.unitPath()
	dir := filepath.Join(t.TempDir(), "claude mesh")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "claudemesh")
	if err := os.Symlink(binPath, link); err != nil {
		t.Fatal(err)
	}
	r := s.run(s.environ(), s.args("daemon", "install-service", "--dry-run", "--binary", link)...)
	want := map[string]string{
		"linux":  "ExecStart=\"" + link + "\" daemon up --foreground\n",
		"darwin": "<string>" + link + "</string>",
	}[runtime.GOOS]
	if r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("--binary %q: exit %d, want output containing %q:\n%s%s", link, r.code, want, r.stdout, r.stderr)
	}
	for _, bad := range []string{"claudemesh", filepath.Join(dir, "missing"), dir} {
		r := s.run(s.environ(), s.args("daemon", "install-service", "--dry-run", "--binary", bad)...)
		if r.code != 2 || !strings.Contains(r.stderr, "--binary") {
			t.Errorf("--binary %q: exit %d, want 2 naming --binary:\n%s", bad, r.code, r.stderr)
		}
	}
}

// TestInstallServiceRefusedInCI: in CI it exits 2 naming the signal and
// --force, and changes nothing; --force overrides; a dry run always prints
// its plan (exit 0), with the refusal as a note.
func TestInstallServiceRefusedInCI(t *testing.T) {
	s := newServiceEnv(t)
	s.unitPath()
	for _, ci := range []string{"CI=true", "GITHUB_ACTIONS=true", "GITLAB_CI=true", "KUBERNETES_SERVICE_HOST=10.0.0.1"} {
		r := s.run(s.environ(ci), "daemon", "install-service")
		if r.code != 2 {
			t.Errorf("%s: exit %d, want 2\nstdout:\n%s\nstderr:\n%s", ci, r.code, r.stdout, r.stderr)
		}
		for _, w := range []string{"--force", ci, "refusing"} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", ci, w, r.stderr)
			}
		}
		r = s.run(s.environ(ci), "daemon", "install-service", "--dry-run")
		if r.code != 0 || !strings.Contains(r.stdout, resolvedBin(t)) {
			t.Errorf("%s --dry-run: exit %d, want 0 and the plan\nstdout:\n%s\nstderr:\n%s", ci, r.code, r.stdout, r.stderr)
		}
		for _, w := range []string{"would refuse", "--force", ci} {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%s --dry-run: stdout lacks %q:\n%s", ci, w, r.stdout)
			}
		}
	}
	if f := s.files(); len(f) != 0 {
		t.Errorf("a refused install created %v", f)
	}

	r := s.run(s.environ("CI=true"), "daemon", "install-service", "--json")
	var doc struct {
		RefusedBy []deploy.Finding `json:"refused_by"`
		Error     string
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != 2 ||
		len(doc.RefusedBy) == 0 || doc.RefusedBy[0] != (deploy.Finding{Kind: deploy.KindCI, Signal: "CI=true"}) || !strings.Contains(doc.Error, "--force") {
		t.Errorf("--json refusal: exit %d, %v, %+v\n%s", r.code, err, doc, r.stdout)
	}

	r = s.run(s.environ("CI=true"), "daemon", "install-service", "--dry-run", "--force")
	if r.code != 0 || !strings.Contains(r.stdout, resolvedBin(t)) {
		t.Errorf("--force in CI: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = s.run(s.environ("CI=true"), "daemon", "install-service", "--dry-run", "--allow-ci-persistent")
	if r.code != 0 {
		t.Errorf("--allow-ci-persistent (the spec's name) in CI: exit %d: %s", r.code, r.stderr)
	}
}

// TestInstallUninstallService: with no systemctl/launchctl on PATH, install
// writes the file (0644) and prints the commands to run; installing again
// changes nothing; uninstall removes it; uninstalling nothing exits 0.
func TestInstallUninstallService(t *testing.T) {
	s := newServiceEnv(t)
	unitPath := s.unitPath()
	daemonDir := filepath.Join(s.home, "cm daemon")
	env := s.environ("CLAUDEMESH_DAEMON_DIR=" + daemonDir)
	tool := map[string]string{"linux": "systemctl", "darwin": "launchctl"}[runtime.GOOS]

	r := s.run(env, s.args("daemon", "install-service")...)
	if r.code != 0 {
		t.Fatalf("install: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, w := range []string{"Wrote " + unitPath, tool + " is not on PATH", tool + " "} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("install output lacks %q:\n%s", w, r.stdout)
		}
	}
	fi, err := os.Stat(unitPath)
	if err != nil {
		t.Fatalf("install wrote no %s: %v", unitPath, err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("%s mode %v, want 0644", unitPath, fi.Mode().Perm())
	}
	content, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{resolvedBin(t), daemonDir, "CLAUDEMESH_DAEMON_DIR"} {
		if !strings.Contains(string(content), w) {
			t.Errorf("installed file lacks %q:\n%s", w, content)
		}
	}
	if strings.Contains(string(content), "CLAUDEMESH_CONFIG_DIR") {
		t.Errorf("CLAUDEMESH_CONFIG_DIR is unset but the file sets it:\n%s", content)
	}

	r = s.run(env, s.args("daemon", "install-service")...)
	if r.code != 0 || !strings.Contains(r.stdout, "already up to date") || strings.Contains(r.stdout, "Wrote") {
		t.Errorf("second install: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = s.run(env, "daemon", "uninstall-service", "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "Would remove "+unitPath) {
		t.Errorf("uninstall --dry-run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(unitPath); err != nil {
		t.Fatalf("uninstall --dry-run removed the file: %v", err)
	}

	r = s.run(env, "daemon", "uninstall-service")
	if r.code != 0 || !strings.Contains(r.stdout, "Removed "+unitPath) {
		t.Errorf("uninstall: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Lstat(unitPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after uninstall (%v)", unitPath, err)
	}

	for _, args := range [][]string{{"daemon", "uninstall-service"}, {"daemon", "uninstall-service", "--json"}} {
		r = s.run(env, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "not_installed") && !strings.Contains(r.stdout, "nothing to do") {
			t.Errorf("%v with nothing installed: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
}
