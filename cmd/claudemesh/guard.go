package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// guardCmd is `claudemesh guard`: git hooks that ask the local daemon
// (which asks the mesh's broker) whether another session reserved the
// files a commit or a push touches, and refuse it when one did
// exclusively (guard_check.go). A hook already there is kept and run
// first (chained); uninstall puts it back.
type guardCmd struct {
	Install   guardInstallCmd   `cmd:"" help:"Install the pre-commit and pre-push hooks in a git repository (a hook already there still runs, first)."`
	Uninstall guardUninstallCmd `cmd:"" help:"Remove the hooks install wrote and put back the ones it found."`
	Check     guardCheckCmd     `cmd:"" hidden:"" help:"What the hooks run: check the staged (pre-commit) or pushed (pre-push) paths."`
}

// guardHooks are the hooks the guard installs.
var guardHooks = []string{"pre-commit", "pre-push"}

// guardMarker is in every hook the guard wrote; chainedSuffix names the
// hook it found, moved aside.
const (
	guardMarker   = "# claudemesh guard:"
	chainedSuffix = ".claudemesh-chained"
)

type guardInstallCmd struct {
	Repo    string `arg:"" optional:"" default:"." help:"A directory of the git repository (default: the current one)."`
	Warn    bool   `help:"Warn about files others reserved instead of refusing the commit."`
	Offline string `enum:"allow,refuse" default:"allow" help:"When the daemon cannot answer: allow (warn, and let the commit through) or refuse."`
}

func (c *guardInstallCmd) Run() error {
	dir, err := hooksDir(c.Repo)
	if err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the claudemesh binary the hooks should run: %w", err)
	}
	if bin, err = filepath.EvalSymlinks(bin); err != nil {
		return fmt.Errorf("find the claudemesh binary the hooks should run: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := "--offline=" + c.Offline
	if c.Warn {
		args += " --warn"
	}
	for _, hook := range guardHooks {
		path := filepath.Join(dir, hook)
		kept, err := setAside(path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(guardScript(hook, bin, args)), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		note := ""
		if kept {
			note = " (the hook that was there runs first)"
		}
		fmt.Printf("installed %s%s\n", path, note)
	}
	return nil
}

// setAside moves a hook that is not the guard's to <hook>.claudemesh-chained
// and reports whether there is one to chain (moved now or before).
func setAside(path string) (bool, error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case strings.Contains(string(data), guardMarker): // installed before: written again
		_, err := os.Stat(path + chainedSuffix)
		return err == nil, nil
	}
	if _, err := os.Stat(path + chainedSuffix); err == nil {
		return false, fmt.Errorf("%s and %s both exist: move one away, then install again", path, path+chainedSuffix)
	}
	if err := os.Rename(path, path+chainedSuffix); err != nil {
		return false, fmt.Errorf("keep the existing hook: %w", err)
	}
	return true, nil
}

// guardScript is a hook: the chained hook first (with the same arguments
// and, for pre-push, the same input), then the check; a claudemesh binary
// gone since the install is said, and lets the commit through unless the
// guard refuses when it cannot ask.
func guardScript(hook, bin, args string) string {
	q := shellQuote(bin)
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n%s refuses a %s touching files another agent session reserved exclusively.\n", guardMarker, hook)
	b.WriteString("# Installed by `claudemesh guard install`; `claudemesh guard uninstall` puts back the hook that was here.\n")
	in := ""
	if hook == "pre-push" {
		b.WriteString("input=$(cat)\n")
		in = `printf '%s\n' "$input" | `
	}
	fmt.Fprintf(&b, "if [ -x \"$0%s\" ]; then %s\"$0%s\" \"$@\" || exit $?; fi\n", chainedSuffix, in, chainedSuffix)
	fmt.Fprintf(&b, "if [ -x %s ]; then %s%s guard check %s %s; exit $?; fi\n", q, in, q, hook, args)
	fmt.Fprintf(&b, "echo \"claudemesh guard: %s is gone; not checked (run claudemesh guard install again)\" >&2\n", strings.ReplaceAll(bin, `"`, ``))
	if strings.Contains(args, "refuse") {
		b.WriteString("exit 1\n")
	}
	return b.String()
}

type guardUninstallCmd struct {
	Repo string `arg:"" optional:"" default:"." help:"A directory of the git repository (default: the current one)."`
}

func (c *guardUninstallCmd) Run() error {
	dir, err := hooksDir(c.Repo)
	if err != nil {
		return err
	}
	for _, hook := range guardHooks {
		path := filepath.Join(dir, hook)
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && !strings.Contains(string(data), guardMarker)) {
			fmt.Printf("%s is not the guard's: left alone\n", path)
			continue
		}
		if err != nil {
			return err
		}
		if err := os.Remove(path); err != nil {
			return err
		}
		if err := os.Rename(path+chainedSuffix, path); err == nil {
			fmt.Printf("removed the guard from %s; the hook that was there is back\n", path)
		} else if errors.Is(err, fs.ErrNotExist) {
			fmt.Printf("removed %s\n", path)
		} else {
			return fmt.Errorf("put back %s: %w", path+chainedSuffix, err)
		}
	}
	return nil
}

// hooksDir is the hooks directory of the repository of dir (core.hooksPath
// when set).
func hooksDir(dir string) (string, error) {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--path-format=absolute", "--git-path", "hooks").Output()
	if err != nil {
		return "", fmt.Errorf("%s is not inside a git repository (git rev-parse: %v)", dir, err)
	}
	return strings.TrimSpace(string(out)), nil
}
