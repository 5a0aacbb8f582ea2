package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/claudemesh/claudemesh-go/deploy"
)

// daemon install-service / uninstall-service exit codes: 0 done (also when
// the service tool is missing and the commands are printed instead, and
// when there is nothing to uninstall); 1 a failure (unsupported OS, I/O, a
// service-manager command failed); 2 refused (CI, container, root) or a bad
// --binary or CLAUDEMESH_*_DIR path.

type daemonInstallServiceCmd struct {
	DryRun bool   `name:"dry-run" help:"Print the file it would write and the commands it would run; change nothing."`
	Force  bool   `aliases:"allow-ci-persistent" help:"Install even in CI, in a container or as root (also --allow-ci-persistent)."`
	JSON   bool   `name:"json" help:"Print the plan and its outcome as one JSON object."`
	Binary string `placeholder:"PATH" help:"Absolute path of the claudemesh binary the service runs (default: this binary, symlinks resolved)."`
}

func (c *daemonInstallServiceCmd) Run() error {
	out := newServiceOutput("install", c.DryRun, c.JSON)
	if _, err := deploy.UnitPath(deploy.Inputs{GOOS: runtime.GOOS}); err != nil {
		return out.fail(nil, err, 1)
	}
	// A dry run changes nothing, so it always prints its plan: a refusal
	// is then a note of what the real install would do.
	refusal := deploy.CheckInstall(deploy.SystemProbe(), c.Force)
	if refusal != nil && !c.DryRun {
		var re *deploy.RefusedError
		if errors.As(refusal, &re) {
			out.refused = re.Findings
		}
		return out.fail(nil, refusal, 2)
	}
	binary, notes, err := serviceBinary(c.Binary)
	if err != nil {
		return out.fail(nil, err, 2)
	}
	in, err := deploy.CurrentInputs(runtime.GOOS, binary)
	if err != nil {
		return out.fail(nil, err, 1)
	}
	plan, err := deploy.PlanInstall(in)
	if errors.Is(err, deploy.ErrBadPath) {
		return out.fail(nil, err, 2)
	} else if err != nil {
		return out.fail(nil, err, 1)
	}
	plan.Notes = append(notes, plan.Notes...)
	if refusal != nil {
		plan.Notes = append(plan.Notes, "without --dry-run this install would refuse: "+refusal.Error())
	}
	return out.run(plan)
}

type daemonUninstallServiceCmd struct {
	DryRun bool `name:"dry-run" help:"Print what it would remove and the commands it would run; change nothing."`
	JSON   bool `name:"json" help:"Print the plan and its outcome as one JSON object."`
}

func (c *daemonUninstallServiceCmd) Run() error {
	out := newServiceOutput("uninstall", c.DryRun, c.JSON)
	home, err := os.UserHomeDir()
	if err != nil {
		return out.fail(nil, fmt.Errorf("find the home directory: %w", err), 1)
	}
	in := deploy.Inputs{GOOS: runtime.GOOS, Home: home, XDGConfigHome: os.Getenv("XDG_CONFIG_HOME"), UID: os.Getuid()}
	plan, err := deploy.PlanUninstall(in)
	if err != nil {
		return out.fail(nil, err, 1)
	}
	return out.run(plan)
}

// serviceBinary is the absolute path the service runs: --binary, checked,
// or this executable with symlinks resolved.
func serviceBinary(flag string) (string, []string, error) {
	if flag != "" {
		if !filepath.IsAbs(flag) {
			return "", nil, fmt.Errorf("--binary %q: not an absolute path", flag)
		}
		fi, err := os.Stat(flag)
		if err != nil {
			return "", nil, fmt.Errorf("--binary: %w", err)
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return "", nil, fmt.Errorf("--binary %q: not an executable file", flag)
		}
		return filepath.Clean(flag), nil, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("find this executable (pass --binary): %w", err)
	}
	abs, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return "", nil, fmt.Errorf("resolve %s (pass --binary): %w", exe, err)
	}
	abs, err = filepath.Abs(abs)
	if err != nil {
		return "", nil, err
	}
	var notes []string
	if abs != filepath.Clean(exe) {
		notes = append(notes, fmt.Sprintf("the service runs %s (%s resolved); if that path changes on upgrade (a Homebrew Cellar, for one), install again after upgrading or pass --binary %s",
			abs, exe, deploy.ShellQuote(exe)))
	}
	if tmp, err := filepath.EvalSymlinks(os.TempDir()); err == nil && strings.HasPrefix(abs, tmp+string(filepath.Separator)) {
		notes = append(notes, abs+" is in the temporary directory (go run?); the service breaks when it is removed")
	}
	return abs, notes, nil
}

// serviceOutput prints a plan and its outcome, as text or as one JSON
// object on stdout.
type serviceOutput struct {
	action  string
	dryRun  bool
	json    bool
	stdout  io.Writer
	refused []deploy.Finding
}

func newServiceOutput(action string, dryRun, asJSON bool) *serviceOutput {
	return &serviceOutput{action: action, dryRun: dryRun, json: asJSON, stdout: os.Stdout}
}

// serviceJSON is the --json document.
type serviceJSON struct {
	Action      string           `json:"action"`
	DryRun      bool             `json:"dry_run"`
	Manager     string           `json:"manager,omitempty"`
	Service     string           `json:"service,omitempty"`
	Path        string           `json:"path,omitempty"`
	State       string           `json:"state,omitempty"`
	Dirs        []jsonFile       `json:"dirs"`
	Files       []jsonFile       `json:"files"`
	Remove      []string         `json:"remove"`
	Commands    []jsonCommand    `json:"commands"`
	Tool        string           `json:"tool,omitempty"`
	ToolMissing bool             `json:"tool_missing"`
	Notes       []string         `json:"notes"`
	RefusedBy   []deploy.Finding `json:"refused_by,omitempty"`
	Error       string           `json:"error,omitempty"`
}

type jsonFile struct {
	Path    string  `json:"path"`
	Mode    string  `json:"mode"`
	Content *string `json:"content,omitempty"`
}

type jsonCommand struct {
	Argv          []string `json:"argv"`
	IgnoreFailure bool     `json:"ignore_failure"`
	Ran           bool     `json:"ran"`
	ExitCode      *int     `json:"exit_code,omitempty"`
	Error         string   `json:"error,omitempty"`
}

func (o *serviceOutput) document(p *deploy.Plan, r *deploy.Result, err error) serviceJSON {
	d := serviceJSON{Action: o.action, DryRun: o.dryRun, Dirs: []jsonFile{}, Files: []jsonFile{},
		Remove: []string{}, Commands: []jsonCommand{}, Notes: []string{}, RefusedBy: o.refused}
	if err != nil {
		d.Error = err.Error()
	}
	if p == nil {
		return d
	}
	d.Manager, d.Service, d.Path, d.State, d.Tool = p.Manager, p.Service, p.Path, p.State, p.Tool
	for _, dir := range p.Dirs {
		d.Dirs = append(d.Dirs, jsonFile{Path: dir.Path, Mode: fmt.Sprintf("%04o", dir.Mode.Perm())})
	}
	for _, f := range p.Files {
		content := string(f.Content)
		d.Files = append(d.Files, jsonFile{Path: f.Path, Mode: fmt.Sprintf("%04o", f.Mode.Perm()), Content: &content})
	}
	d.Remove = append(d.Remove, p.Remove...)
	d.Notes = append(d.Notes, p.Notes...)
	if r != nil {
		d.ToolMissing = r.ToolMissing
		for _, cr := range r.Commands {
			jc := jsonCommand{Argv: cr.Argv, IgnoreFailure: cr.IgnoreFailure, Ran: cr.Ran, Error: cr.Error}
			if cr.Ran {
				code := cr.ExitCode
				jc.ExitCode = &code
			}
			d.Commands = append(d.Commands, jc)
		}
	} else {
		for _, c := range p.Commands() {
			d.Commands = append(d.Commands, jsonCommand{Argv: c.Argv, IgnoreFailure: c.IgnoreFailure})
		}
	}
	return d
}

// fail reports err with the given exit code (after printing the JSON
// document in --json mode).
func (o *serviceOutput) fail(p *deploy.Plan, err error, code int) error {
	if o.json {
		o.emit(o.document(p, nil, err))
	}
	return &exitError{code: code, err: err}
}

func (o *serviceOutput) emit(d serviceJSON) {
	enc := json.NewEncoder(o.stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(d)
}

// run prints the plan (dry run) or applies it and prints what happened.
func (o *serviceOutput) run(p *deploy.Plan) error {
	if p.State == deploy.StateAbsent {
		if o.json {
			o.emit(o.document(p, &deploy.Result{}, nil))
		} else {
			fmt.Fprintf(o.stdout, "No claudemesh service is installed (%s does not exist); nothing to do.\n", p.Path)
		}
		return nil
	}
	if o.dryRun {
		if o.json {
			o.emit(o.document(p, nil, nil))
			return nil
		}
		o.printDryRun(p)
		return nil
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := deploy.ApplyOptions{
		SearchPath: os.Getenv("PATH"),
		Output:     os.Stderr, // keeps stdout for our own report (and --json)
	}
	if !o.json {
		opts.Log = o.stdout
	}
	res, err := p.Apply(ctx, opts)
	if o.json {
		o.emit(o.document(p, res, err))
	} else {
		o.printResult(p, res, err)
	}
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	return nil
}

func (o *serviceOutput) printDryRun(p *deploy.Plan) {
	w := o.stdout
	fmt.Fprintf(w, "Dry run, nothing is changed: %s the %s service %s (%s).\n", o.action, p.Manager, p.Service, p.State)
	for _, c := range p.Before {
		fmt.Fprintf(w, "\nWould run:\n  %s%s\n", c, ignoredSuffix(c))
	}
	for _, d := range p.Dirs {
		fmt.Fprintf(w, "\nWould create directory %s (mode %04o)\n", d.Path, d.Mode.Perm())
	}
	if o.action == "install" && p.State == deploy.StateUnchanged {
		fmt.Fprintf(w, "\n%s is already installed with this content; it would not be rewritten.\n", p.Path)
	}
	for _, f := range p.Files {
		fmt.Fprintf(w, "\nWould write %s (mode %04o):\n\n%s", f.Path, f.Mode.Perm(), f.Content)
	}
	for _, r := range p.Remove {
		fmt.Fprintf(w, "\nWould remove %s\n", r)
	}
	if len(p.After) > 0 {
		fmt.Fprintf(w, "\nWould run:\n")
		for _, c := range p.After {
			fmt.Fprintf(w, "  %s%s\n", c, ignoredSuffix(c))
		}
	}
	if len(p.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range p.Notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
	}
}

func (o *serviceOutput) printResult(p *deploy.Plan, r *deploy.Result, err error) {
	w := o.stdout
	if o.action == "install" && p.State == deploy.StateUnchanged {
		fmt.Fprintf(w, "%s is already up to date\n", p.Path)
	}
	var notRun []deploy.Command
	for _, c := range r.Commands {
		if !c.Ran {
			notRun = append(notRun, c.Command)
		}
	}
	switch {
	case r.ToolMissing && o.action == "install":
		fmt.Fprintf(w, "%s is not on PATH, so the service was not loaded; run these commands yourself:\n", p.Tool)
		for _, c := range notRun {
			fmt.Fprintf(w, "  %s%s\n", c, ignoredSuffix(c))
		}
	case r.ToolMissing:
		fmt.Fprintf(w, "%s is not on PATH, so no service manager was told; if the daemon still runs, stop it with: claudemesh daemon down\n", p.Tool)
	case err != nil:
		if len(notRun) > 0 {
			fmt.Fprintf(w, "Not run after the failure:\n")
			for _, c := range notRun {
				fmt.Fprintf(w, "  %s\n", c)
			}
		}
		if p.Manager == deploy.Systemd {
			fmt.Fprintf(w, "See: systemctl --user status %s; journalctl --user -u %s\n", p.Service, p.Service)
			fmt.Fprintf(w, "If systemctl cannot connect to the bus, this user has no systemd user session: log in as the user (not through su or sudo), or enable lingering with loginctl enable-linger.\n")
		}
	case o.action == "install":
		fmt.Fprintf(w, "Installed: the %s service %s is enabled and running.\n", p.Manager, p.Service)
	default:
		fmt.Fprintf(w, "Uninstalled the %s service %s.\n", p.Manager, p.Service)
	}
	if err == nil {
		for _, n := range p.Notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
	}
}

func ignoredSuffix(c deploy.Command) string {
	if c.IgnoreFailure {
		return "   # a failure here is ignored"
	}
	return ""
}
