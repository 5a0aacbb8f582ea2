package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/claudemesh/claudemesh-go/config"
)

// Service managers.
const (
	Systemd = "systemd"
	Launchd = "launchd"
)

// Plan states.
const (
	StateNew       = "new"           // install: no unit file yet
	StateChanged   = "changed"       // install: a different unit file is in place
	StateUnchanged = "unchanged"     // install: the same unit file is in place
	StateInstalled = "installed"     // uninstall: a unit file to remove
	StateAbsent    = "not_installed" // uninstall: nothing to do
)

// ErrUnsupportedOS: no service manager this package knows.
var ErrUnsupportedOS = errors.New("install-service supports Linux (systemd user units) and macOS (launchd agents) only")

// Inputs are everything a plan is computed from.
type Inputs struct {
	GOOS string // "linux" or "darwin"
	Home string // the user's home directory
	// XDGConfigHome is $XDG_CONFIG_HOME; empty or relative means
	// ~/.config (the XDG rule).
	XDGConfigHome string
	// Binary is the absolute path of the claudemesh executable to run.
	Binary string
	// DaemonDir and ConfigDir are CLAUDEMESH_DAEMON_DIR and
	// CLAUDEMESH_CONFIG_DIR as set in the installing environment ("" when
	// unset). Relative values are resolved against Cwd.
	DaemonDir, ConfigDir string
	Cwd                  string
	// UID names the launchd domain gui/<uid>.
	UID int
	// User is the login name, for hints ("" when unknown).
	User string
}

// CurrentInputs fills Inputs from this process: runtime GOOS, home
// directory, environment, working directory and uid. binary is the
// executable the service will run.
func CurrentInputs(goos, binary string) (Inputs, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return Inputs{}, fmt.Errorf("find the home directory: %w", err)
	}
	cwd, _ := os.Getwd() // only needed for relative CLAUDEMESH_* values
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return Inputs{
		GOOS:          goos,
		Home:          home,
		XDGConfigHome: os.Getenv("XDG_CONFIG_HOME"),
		Binary:        binary,
		DaemonDir:     os.Getenv(config.EnvDaemonDir),
		ConfigDir:     os.Getenv(config.EnvConfigDir),
		Cwd:           cwd,
		UID:           os.Getuid(),
		User:          name,
	}, nil
}

// Dir is a directory a plan creates (with its missing parents) if missing.
type Dir struct {
	Path string      `json:"path"`
	Mode fs.FileMode `json:"-"`
}

// File is a file a plan writes, atomically.
type File struct {
	Path    string      `json:"path"`
	Mode    fs.FileMode `json:"-"`
	Content []byte      `json:"-"`
}

// Command is one service-manager invocation.
type Command struct {
	Argv []string `json:"argv"`
	// IgnoreFailure: a failure is expected when there is nothing to act on
	// (booting out a job that is not loaded).
	IgnoreFailure bool `json:"ignore_failure,omitempty"`
}

// String is the command as a shell line.
func (c Command) String() string {
	q := make([]string, len(c.Argv))
	for i, a := range c.Argv {
		q[i] = ShellQuote(a)
	}
	return strings.Join(q, " ")
}

// Plan is what an install or uninstall does, in order: run Before, create
// Dirs, write Files / delete Remove, run After.
type Plan struct {
	Action  string // "install" or "uninstall"
	Manager string // Systemd or Launchd
	Tool    string // "systemctl" or "launchctl"
	Service string // SystemdUnit or LaunchdLabel
	Path    string // the unit file or plist
	State   string // one of the State constants
	Dirs    []Dir
	Files   []File
	Remove  []string // deleted if present
	Before  []Command
	After   []Command
	Notes   []string // things the user should know
}

// Commands is Before then After.
func (p *Plan) Commands() []Command {
	return append(append([]Command(nil), p.Before...), p.After...)
}

// Dirs and files.
func systemdUnitDir(in Inputs) string {
	if in.XDGConfigHome != "" && filepath.IsAbs(in.XDGConfigHome) {
		return filepath.Join(in.XDGConfigHome, "systemd", "user")
	}
	return filepath.Join(in.Home, ".config", "systemd", "user")
}

func launchAgentsDir(in Inputs) string {
	return filepath.Join(in.Home, "Library", "LaunchAgents")
}

// UnitPath is where the unit file (systemd) or plist (launchd) lives.
func UnitPath(in Inputs) (string, error) {
	switch in.GOOS {
	case "linux":
		return filepath.Join(systemdUnitDir(in), SystemdUnit), nil
	case "darwin":
		return filepath.Join(launchAgentsDir(in), LaunchdLabel+".plist"), nil
	}
	return "", fmt.Errorf("%w (this is %s)", ErrUnsupportedOS, in.GOOS)
}

// unit is the content's inputs: the binary and the two directories.
func (in Inputs) unit() (Unit, config.Paths, error) {
	if !filepath.IsAbs(in.Home) {
		return Unit{}, config.Paths{}, fmt.Errorf("home directory %q is not absolute", in.Home)
	}
	if err := checkPath("binary", in.Binary); err != nil {
		return Unit{}, config.Paths{}, err
	}
	u := Unit{Binary: filepath.Clean(in.Binary), WorkingDirectory: filepath.Clean(in.Home)}
	// The same defaults as config.ResolvePaths, from explicit inputs.
	paths := config.Paths{
		DaemonDir: filepath.Join(in.Home, ".claudemesh", "daemon"),
		ConfigDir: filepath.Join(in.Home, ".claudemesh"),
	}
	for _, v := range []struct {
		name, value string
		dst         *string
	}{
		{config.EnvDaemonDir, in.DaemonDir, &paths.DaemonDir},
		{config.EnvConfigDir, in.ConfigDir, &paths.ConfigDir},
	} {
		if v.value == "" {
			continue
		}
		abs := v.value
		if !filepath.IsAbs(abs) {
			if !filepath.IsAbs(in.Cwd) {
				return Unit{}, config.Paths{}, fmt.Errorf("%w: %s=%q is relative and the working directory is unknown; set an absolute path", ErrBadPath, v.name, v.value)
			}
			abs = filepath.Join(in.Cwd, abs)
		}
		abs = filepath.Clean(abs)
		*v.dst = abs
		u.Environment = append(u.Environment, EnvVar{v.name, abs})
	}
	u.LogFile = paths.LogFile()
	return u, paths, nil
}

// PlanInstall computes an install. It reads the unit file currently at the
// target path, if any, to tell a new install from an upgrade.
func PlanInstall(in Inputs) (*Plan, error) {
	path, err := UnitPath(in)
	if err != nil {
		return nil, err
	}
	u, paths, err := in.unit()
	if err != nil {
		return nil, err
	}
	p := &Plan{Action: "install", Path: path}
	var content []byte
	switch in.GOOS {
	case "linux":
		p.Manager, p.Tool, p.Service = Systemd, "systemctl", SystemdUnit
		content, err = RenderSystemd(u)
	case "darwin":
		p.Manager, p.Tool, p.Service = Launchd, "launchctl", LaunchdLabel
		content, err = RenderLaunchd(u)
	}
	if err != nil {
		return nil, err
	}

	old, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.State = StateNew
	case err != nil:
		return nil, fmt.Errorf("read the installed unit: %w", err)
	case bytes.Equal(old, content):
		p.State = StateUnchanged
	default:
		p.State = StateChanged
	}

	p.Dirs = missingDirs(Dir{filepath.Dir(path), 0o755})
	if p.State != StateUnchanged {
		p.Files = []File{{Path: path, Mode: 0o644, Content: content}}
	}
	switch p.Manager {
	case Systemd:
		sc := func(args ...string) Command { return Command{Argv: append([]string{"systemctl", "--user"}, args...)} }
		p.After = append(p.After, sc("daemon-reload"))
		if p.State == StateChanged {
			// An upgrade: restart a running daemon so it runs the new
			// unit; a stopped one stays stopped until enable --now.
			p.After = append(p.After, sc("try-restart", SystemdUnit))
		}
		p.After = append(p.After, sc("enable", "--now", SystemdUnit))
		linger := "loginctl enable-linger"
		if in.User != "" {
			linger += " " + ShellQuote(in.User)
		}
		p.Notes = append(p.Notes,
			"logs: journalctl --user -u "+SystemdUnit,
			"the service runs while you are logged in; to start it at boot and keep it after logout: "+linger)
		if def := filepath.Join(in.Home, ".config"); in.XDGConfigHome != "" && filepath.IsAbs(in.XDGConfigHome) && filepath.Clean(in.XDGConfigHome) != def {
			p.Notes = append(p.Notes, "XDG_CONFIG_HOME is "+in.XDGConfigHome+": the systemd user manager finds the unit only if its own environment has the same XDG_CONFIG_HOME")
		}
	case Launchd:
		// launchd opens StandardOutPath before it starts the daemon.
		p.Dirs = append(p.Dirs, missingDirs(Dir{paths.DaemonDir, 0o700})...)
		domain := "gui/" + strconv.Itoa(in.UID)
		target := domain + "/" + LaunchdLabel
		if p.State != StateNew {
			// bootstrap fails on a loaded job: unload the old one first.
			p.Before = append(p.Before, Command{Argv: []string{"launchctl", "bootout", target}, IgnoreFailure: true})
		}
		// enable first: bootstrap refuses a job that was once disabled.
		p.After = append(p.After,
			Command{Argv: []string{"launchctl", "enable", target}},
			Command{Argv: []string{"launchctl", "bootstrap", domain, path}})
		p.Notes = append(p.Notes, "logs: "+u.LogFile)
	}
	return p, nil
}

// PlanUninstall computes an uninstall; with no unit file at the target path
// the plan is empty and its State is StateAbsent.
func PlanUninstall(in Inputs) (*Plan, error) {
	path, err := UnitPath(in)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(in.Home) {
		return nil, fmt.Errorf("home directory %q is not absolute", in.Home)
	}
	p := &Plan{Action: "uninstall", Path: path, State: StateInstalled}
	switch in.GOOS {
	case "linux":
		p.Manager, p.Tool, p.Service = Systemd, "systemctl", SystemdUnit
	case "darwin":
		p.Manager, p.Tool, p.Service = Launchd, "launchctl", LaunchdLabel
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		p.State = StateAbsent
		return p, nil
	} else if err != nil {
		return nil, err
	}
	p.Remove = []string{path}
	switch p.Manager {
	case Systemd:
		p.Before = []Command{{Argv: []string{"systemctl", "--user", "disable", "--now", SystemdUnit}}}
		// What disable removes; listed so that an uninstall without
		// systemctl leaves no dangling link.
		wants := filepath.Join(filepath.Dir(path), "default.target.wants", SystemdUnit)
		if _, err := os.Lstat(wants); err == nil {
			p.Remove = append(p.Remove, wants)
		}
		p.After = []Command{{Argv: []string{"systemctl", "--user", "daemon-reload"}}}
	case Launchd:
		p.Before = []Command{{Argv: []string{"launchctl", "bootout", "gui/" + strconv.Itoa(in.UID) + "/" + LaunchdLabel}, IgnoreFailure: true}}
	}
	return p, nil
}

// missingDirs returns d if it does not exist yet.
func missingDirs(d Dir) []Dir {
	if _, err := os.Stat(d.Path); err == nil {
		return nil
	}
	return []Dir{d}
}

// ShellQuote quotes s for a POSIX shell when it needs quoting.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./-_", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
