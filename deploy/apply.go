package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/claudemesh/claudemesh-go/config"
)

// ApplyOptions say how Apply runs the plan's commands.
type ApplyOptions struct {
	// SearchPath is the PATH the tool is looked up on. The commands run only
	// when the tool is found there; otherwise Apply still changes the files
	// and reports ToolMissing.
	SearchPath string
	// Output receives the commands' stdout and stderr (nil discards them).
	Output io.Writer
	// Log, if set, gets one line per step as it happens: "Created <dir>",
	// "Wrote <file>", "Removed <file>", "$ <command>".
	Log io.Writer
}

// CommandResult is one command of the plan and what became of it.
type CommandResult struct {
	Command
	Ran      bool   `json:"ran"`
	ExitCode int    `json:"exit_code"` // -1 when it could not start or was killed
	Error    string `json:"error,omitempty"`
}

// Result is what Apply did.
type Result struct {
	CreatedDirs []string `json:"created_dirs"`
	Wrote       []string `json:"wrote"`
	Removed     []string `json:"removed"`
	// ToolPath is where the tool was found; empty with ToolMissing.
	ToolPath    string `json:"tool_path,omitempty"`
	ToolMissing bool   `json:"tool_missing"`
	// Commands lists every command of the plan in order; Ran is false for
	// those not run (tool missing, or an earlier failure).
	Commands []CommandResult `json:"commands"`
}

// CommandError is a service-manager command that failed.
type CommandError struct {
	Command  Command
	ExitCode int
	Err      error
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("`%s` failed: %v", e.Command, e.Err)
}

func (e *CommandError) Unwrap() error { return e.Err }

// Apply carries the plan out. An install stops at the first failure (the
// file stays written); an uninstall goes on after a failed stop so the
// files are removed, then reports the first failure.
func (p *Plan) Apply(ctx context.Context, opts ApplyOptions) (*Result, error) {
	r := &Result{CreatedDirs: []string{}, Wrote: []string{}, Removed: []string{}, Commands: []CommandResult{}}
	if p.State == StateAbsent {
		return r, nil
	}
	if p.Tool != "" {
		r.ToolPath = lookPath(p.Tool, opts.SearchPath)
		r.ToolMissing = r.ToolPath == ""
	}
	for _, c := range p.Commands() {
		r.Commands = append(r.Commands, CommandResult{Command: c})
	}
	keepGoing := p.Action == "uninstall"
	var firstErr error
	run := func(i int) {
		cr := &r.Commands[i]
		if r.ToolMissing || (firstErr != nil && !keepGoing) {
			return
		}
		logf(opts.Log, "$ %s\n", cr.Command)
		if err := r.exec(ctx, cr, opts.Output); err != nil && !cr.IgnoreFailure && firstErr == nil {
			firstErr = err
		}
	}

	for i := range p.Before {
		run(i)
	}
	if firstErr != nil && !keepGoing {
		return r, firstErr
	}
	for _, d := range p.Dirs {
		if _, err := os.Stat(d.Path); err == nil {
			continue
		}
		if err := os.MkdirAll(d.Path, d.Mode); err != nil {
			return r, fmt.Errorf("create %s: %w", d.Path, err)
		}
		r.CreatedDirs = append(r.CreatedDirs, d.Path)
		logf(opts.Log, "Created %s\n", d.Path)
	}
	for _, f := range p.Files {
		if err := config.WriteFileAtomic(f.Path, f.Content, f.Mode); err != nil {
			return r, fmt.Errorf("write %s: %w", f.Path, err)
		}
		r.Wrote = append(r.Wrote, f.Path)
		logf(opts.Log, "Wrote %s\n", f.Path)
	}
	for _, path := range p.Remove {
		err := os.Remove(path)
		switch {
		case err == nil:
			r.Removed = append(r.Removed, path)
			logf(opts.Log, "Removed %s\n", path)
		case errors.Is(err, fs.ErrNotExist): // disable already removed it
		default:
			return r, fmt.Errorf("remove %s: %w", path, err)
		}
	}
	for i := range p.After {
		run(len(p.Before) + i)
	}
	return r, firstErr
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format, args...)
	}
}

// exec runs one command with the tool found on the search path.
func (r *Result) exec(ctx context.Context, cr *CommandResult, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	cmd := exec.CommandContext(ctx, r.ToolPath, cr.Argv[1:]...)
	cmd.Args[0] = cr.Argv[0]
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	cr.Ran = true
	cr.ExitCode = cmd.ProcessState.ExitCode() // -1 when it did not start
	if err != nil {
		cr.Error = err.Error()
		return &CommandError{Command: cr.Command, ExitCode: cr.ExitCode, Err: err}
	}
	return nil
}

// lookPath finds an executable regular file named tool in the directories
// of searchPath (empty entries are skipped, not taken as ".").
func lookPath(tool, searchPath string) string {
	for _, dir := range filepath.SplitList(searchPath) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, tool)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}
