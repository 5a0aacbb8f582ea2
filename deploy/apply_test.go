package deploy

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTool writes an executable script named tool into a fresh directory
// and returns that directory (a PATH) and the file the script appends its
// arguments to. The script exits with the status in the file <dir>/fail-<arg1>
// when that exists, else 0.
func fakeTool(t *testing.T, tool string) (pathDir, logFile string) {
	t.Helper()
	pathDir = t.TempDir()
	logFile = filepath.Join(pathDir, "calls.log")
	script := "#!/bin/sh\n" +
		"echo \"$*\" >> '" + logFile + "'\n" +
		"for a in \"$@\"; do case \"$a\" in --*) ;; *) f='" + pathDir + "/fail-'\"$a\"; break;; esac; done\n" +
		"if [ -f \"$f\" ]; then echo \"$a: failing\" >&2; exit \"$(cat \"$f\")\"; fi\n" +
		"echo \"$a: ok\"\n"
	if err := os.WriteFile(filepath.Join(pathDir, tool), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return pathDir, logFile
}

func calls(t *testing.T, logFile string) []string {
	t.Helper()
	b, err := os.ReadFile(logFile)
	if errors.Is(err, os.ErrNotExist) {
		return []string{}
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func linuxInputs(t *testing.T) Inputs {
	return Inputs{GOOS: "linux", Home: t.TempDir(), Binary: "/usr/local/bin/claudemesh", UID: 1000}
}

func mustPlan(t *testing.T, f func(Inputs) (*Plan, error), in Inputs) *Plan {
	t.Helper()
	p, err := f(in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestApplyWithoutTool(t *testing.T) {
	in := linuxInputs(t)
	emptyPath := t.TempDir() // no systemctl here
	unitPath := filepath.Join(in.Home, ".config", "systemd", "user", SystemdUnit)

	// Planning changes nothing (that is what --dry-run prints).
	p := mustPlan(t, PlanInstall, in)
	if _, err := os.Stat(filepath.Join(in.Home, ".config")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("planning created %s/.config (%v)", in.Home, err)
	}

	var out bytes.Buffer
	r, err := p.Apply(context.Background(), ApplyOptions{SearchPath: emptyPath, Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	if !r.ToolMissing || r.ToolPath != "" {
		t.Errorf("ToolMissing %v, ToolPath %q; want systemctl reported missing", r.ToolMissing, r.ToolPath)
	}
	if len(r.Commands) != 2 || r.Commands[0].Ran || r.Commands[1].Ran {
		t.Errorf("commands %+v, want two, none run", r.Commands)
	}
	if out.Len() != 0 {
		t.Errorf("output %q with no tool", out.String())
	}
	fi, err := os.Stat(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("unit mode %v, want 0644", fi.Mode().Perm())
	}
	if di, err := os.Stat(filepath.Dir(unitPath)); err != nil || di.Mode().Perm()&0o022 != 0 {
		t.Errorf("unit dir: %v, mode %v", err, di.Mode())
	}
	got, err := os.ReadFile(unitPath)
	if err != nil || !bytes.Equal(got, p.Files[0].Content) {
		t.Errorf("unit content differs from the plan (%v)", err)
	}
	if !bytes.Contains(got, []byte("\nExecStart=/usr/local/bin/claudemesh daemon up --foreground\n")) {
		t.Errorf("unit lacks the ExecStart line:\n%s", got)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(unitPath), ".*.tmp")); len(leftovers) > 0 {
		t.Errorf("temp files left: %v", leftovers)
	}
	if r.Wrote[0] != unitPath || len(r.CreatedDirs) != 1 {
		t.Errorf("result %+v", r)
	}

	// Installing again finds it unchanged and writes nothing.
	p = mustPlan(t, PlanInstall, in)
	if p.State != StateUnchanged {
		t.Fatalf("second install state %s", p.State)
	}
	if r, err := p.Apply(context.Background(), ApplyOptions{SearchPath: emptyPath}); err != nil || len(r.Wrote) != 0 {
		t.Fatalf("second install: %+v, %v", r, err)
	}

	// Uninstall removes it, also without systemctl.
	p = mustPlan(t, PlanUninstall, in)
	if p.State != StateInstalled {
		t.Fatalf("uninstall state %s", p.State)
	}
	r, err = p.Apply(context.Background(), ApplyOptions{SearchPath: emptyPath})
	if err != nil || !r.ToolMissing || len(r.Removed) != 1 {
		t.Fatalf("uninstall: %+v, %v", r, err)
	}
	if _, err := os.Lstat(unitPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unit still there after uninstall (%v)", err)
	}

	// Nothing installed: nothing to do, no error.
	p = mustPlan(t, PlanUninstall, in)
	if p.State != StateAbsent {
		t.Fatalf("state %s after uninstall", p.State)
	}
	if r, err := p.Apply(context.Background(), ApplyOptions{SearchPath: emptyPath}); err != nil || len(r.Removed)+len(r.Commands) != 0 {
		t.Fatalf("uninstall of nothing: %+v, %v", r, err)
	}
}

func TestApplyRunsToolInOrder(t *testing.T) {
	in := linuxInputs(t)
	pathDir, log := fakeTool(t, "systemctl")
	var out bytes.Buffer
	var logged bytes.Buffer
	opts := ApplyOptions{SearchPath: t.TempDir() + string(filepath.ListSeparator) + pathDir, Output: &out, Log: &logged}

	r, err := mustPlan(t, PlanInstall, in).Apply(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.ToolMissing || r.ToolPath != filepath.Join(pathDir, "systemctl") {
		t.Errorf("tool %q missing %v", r.ToolPath, r.ToolMissing)
	}
	want := []string{"--user daemon-reload", "--user enable --now claudemesh-daemon.service"}
	sameLines(t, "systemctl calls", calls(t, log), want)
	unitPath := r.Wrote[0]
	sameLines(t, "log", strings.Split(strings.TrimSpace(logged.String()), "\n"), []string{
		"Created " + filepath.Dir(unitPath), "Wrote " + unitPath, "$ systemctl " + want[0], "$ systemctl " + want[1]})
	if !strings.Contains(out.String(), "daemon-reload: ok") {
		t.Errorf("tool output not passed through: %q", out.String())
	}
	for _, c := range r.Commands {
		if !c.Ran || c.ExitCode != 0 {
			t.Errorf("command %+v", c)
		}
	}

	// The service is enabled (the fake does not link it; do it as systemd
	// would), then uninstalled: disable, remove, reload.
	wants := filepath.Join(filepath.Dir(unitPath), "default.target.wants", SystemdUnit)
	if err := os.MkdirAll(filepath.Dir(wants), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(unitPath, wants); err != nil {
		t.Fatal(err)
	}
	os.Remove(log)
	r, err = mustPlan(t, PlanUninstall, in).Apply(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	sameLines(t, "uninstall calls", calls(t, log), []string{"--user disable --now claudemesh-daemon.service", "--user daemon-reload"})
	sameLines(t, "removed", r.Removed, []string{unitPath, wants})
}

func TestApplyStopsAtFailedInstallCommand(t *testing.T) {
	in := linuxInputs(t)
	pathDir, log := fakeTool(t, "systemctl")
	if err := os.WriteFile(filepath.Join(pathDir, "fail-daemon-reload"), []byte("3"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := mustPlan(t, PlanInstall, in).Apply(context.Background(), ApplyOptions{SearchPath: pathDir})
	var ce *CommandError
	if !errors.As(err, &ce) || ce.ExitCode != 3 || ce.Command.Argv[2] != "daemon-reload" {
		t.Fatalf("err = %v, want daemon-reload exiting 3", err)
	}
	if !strings.Contains(err.Error(), "systemctl --user daemon-reload") {
		t.Errorf("error %q does not show the command", err)
	}
	sameLines(t, "calls", calls(t, log), []string{"--user daemon-reload"})
	if !r.Commands[0].Ran || r.Commands[0].ExitCode != 3 || r.Commands[1].Ran {
		t.Errorf("commands %+v", r.Commands)
	}
	if len(r.Wrote) != 1 {
		t.Errorf("the unit should stay written: %+v", r)
	}
}

func TestApplyUninstallContinuesAfterFailedStop(t *testing.T) {
	in := linuxInputs(t)
	emptyPath := t.TempDir()
	if _, err := mustPlan(t, PlanInstall, in).Apply(context.Background(), ApplyOptions{SearchPath: emptyPath}); err != nil {
		t.Fatal(err)
	}
	pathDir, log := fakeTool(t, "systemctl")
	if err := os.WriteFile(filepath.Join(pathDir, "fail-disable"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := mustPlan(t, PlanUninstall, in)
	r, err := p.Apply(context.Background(), ApplyOptions{SearchPath: pathDir})
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Command.Argv[2] != "disable" {
		t.Fatalf("err = %v, want the failed disable", err)
	}
	sameLines(t, "calls", calls(t, log), []string{"--user disable --now claudemesh-daemon.service", "--user daemon-reload"})
	if _, err := os.Lstat(p.Path); !errors.Is(err, os.ErrNotExist) || len(r.Removed) != 1 {
		t.Errorf("unit not removed after a failed stop: %+v (%v)", r, err)
	}
}

func TestApplyIgnoresExpectedFailure(t *testing.T) {
	home := t.TempDir()
	in := Inputs{GOOS: "darwin", Home: home, Binary: "/usr/local/bin/claudemesh", UID: 501}
	emptyPath := t.TempDir()
	if _, err := mustPlan(t, PlanInstall, in).Apply(context.Background(), ApplyOptions{SearchPath: emptyPath}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(home, ".claudemesh", "daemon")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("daemon dir for launchd's log: %v %v", fi, err)
	}
	// Reinstall with a changed binary: the bootout of a job that is not
	// loaded fails, which is expected; enable and bootstrap still run.
	in.Binary = "/opt/claudemesh"
	pathDir, log := fakeTool(t, "launchctl")
	if err := os.WriteFile(filepath.Join(pathDir, "fail-bootout"), []byte("3"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := mustPlan(t, PlanInstall, in)
	r, err := p.Apply(context.Background(), ApplyOptions{SearchPath: pathDir})
	if err != nil {
		t.Fatal(err)
	}
	sameLines(t, "calls", calls(t, log), []string{
		"bootout gui/501/com.claudemesh.daemon",
		"enable gui/501/com.claudemesh.daemon",
		"bootstrap gui/501 " + p.Path,
	})
	if c := r.Commands[0]; !c.Ran || c.ExitCode != 3 || c.Error == "" {
		t.Errorf("bootout result %+v", c)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"exec": 0o755, "plain": 0o644} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	list := strings.Join([]string{"", t.TempDir(), dir}, string(filepath.ListSeparator))
	for tool, want := range map[string]string{"exec": filepath.Join(dir, "exec"), "plain": "", "adir": "", "none": ""} {
		if got := lookPath(tool, list); got != want {
			t.Errorf("lookPath(%q) = %q, want %q", tool, got, want)
		}
	}
	if got := lookPath("exec", ""); got != "" {
		t.Errorf("lookPath with an empty PATH = %q", got)
	}
}
