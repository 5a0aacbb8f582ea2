package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// argvs is the commands' argument vectors, one line each.
func argvs(cs []Command) []string {
	out := []string{}
	for _, c := range cs {
		s := strings.Join(c.Argv, " ")
		if c.IgnoreFailure {
			s += " (ignore failure)"
		}
		out = append(out, s)
	}
	return out
}

func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

func TestUnitPath(t *testing.T) {
	for _, tc := range []struct {
		in   Inputs
		want string
	}{
		{Inputs{GOOS: "linux", Home: "/home/ann"}, "/home/ann/.config/systemd/user/claudemesh-daemon.service"},
		{Inputs{GOOS: "linux", Home: "/home/ann", XDGConfigHome: "/xdg"}, "/xdg/systemd/user/claudemesh-daemon.service"},
		{Inputs{GOOS: "linux", Home: "/home/ann", XDGConfigHome: "rel/xdg"}, "/home/ann/.config/systemd/user/claudemesh-daemon.service"},
		{Inputs{GOOS: "darwin", Home: "/Users/ann", XDGConfigHome: "/xdg"}, "/Users/ann/Library/LaunchAgents/com.claudemesh.daemon.plist"},
	} {
		got, err := UnitPath(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("UnitPath(%+v) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, goos := range []string{"windows", "freebsd", ""} {
		if _, err := UnitPath(Inputs{GOOS: goos, Home: "/h"}); !errors.Is(err, ErrUnsupportedOS) {
			t.Errorf("UnitPath(%q) error = %v, want ErrUnsupportedOS", goos, err)
		}
		if _, err := PlanInstall(Inputs{GOOS: goos, Home: "/h", Binary: "/b"}); !errors.Is(err, ErrUnsupportedOS) {
			t.Errorf("PlanInstall(%q) error = %v, want ErrUnsupportedOS", goos, err)
		}
		if _, err := PlanUninstall(Inputs{GOOS: goos, Home: "/h"}); !errors.Is(err, ErrUnsupportedOS) {
			t.Errorf("PlanUninstall(%q) error = %v, want ErrUnsupportedOS", goos, err)
		}
	}
}

func TestPlanInstallSystemd(t *testing.T) {
	home := t.TempDir()
	in := Inputs{GOOS: "linux", Home: home, Binary: "/opt/cm/claudemesh", DaemonDir: "rel/d", Cwd: "/work", UID: 1000, User: "ann"}
	unitPath := filepath.Join(home, ".config", "systemd", "user", SystemdUnit)

	p, err := PlanInstall(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Manager != Systemd || p.Tool != "systemctl" || p.Service != SystemdUnit || p.Path != unitPath || p.State != StateNew {
		t.Fatalf("plan %+v", p)
	}
	if len(p.Dirs) != 1 || p.Dirs[0].Path != filepath.Dir(unitPath) || p.Dirs[0].Mode != 0o755 {
		t.Errorf("dirs %+v, want the unit directory 0755", p.Dirs)
	}
	if len(p.Files) != 1 || p.Files[0].Path != unitPath || p.Files[0].Mode != 0o644 {
		t.Fatalf("files %+v", p.Files)
	}
	m := unitOptions(t, p.Files[0].Content)
	if got := m["Service"]["ExecStart"]; len(got) != 1 || got[0] != "/opt/cm/claudemesh daemon up --foreground" {
		t.Errorf("ExecStart %q", got)
	}
	// The relative CLAUDEMESH_DAEMON_DIR is made absolute; the unset
	// CLAUDEMESH_CONFIG_DIR gets no line.
	sameLines(t, "Environment", m["Service"]["Environment"], []string{`"CLAUDEMESH_DAEMON_DIR=/work/rel/d"`})
	sameLines(t, "before", argvs(p.Before), []string{})
	sameLines(t, "after", argvs(p.After), []string{
		"systemctl --user daemon-reload",
		"systemctl --user enable --now claudemesh-daemon.service",
	})
	if !strings.Contains(strings.Join(p.Notes, "\n"), "loginctl enable-linger ann") {
		t.Errorf("notes %q lack the linger hint", p.Notes)
	}

	// Same content in place: nothing to write, still reload and enable.
	if err := os.MkdirAll(filepath.Dir(unitPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(unitPath, p.Files[0].Content, 0o644); err != nil {
		t.Fatal(err)
	}
	p2, err := PlanInstall(in)
	if err != nil {
		t.Fatal(err)
	}
	if p2.State != StateUnchanged || len(p2.Files) != 0 || len(p2.Dirs) != 0 {
		t.Errorf("unchanged plan: state %s, files %d, dirs %+v", p2.State, len(p2.Files), p2.Dirs)
	}
	sameLines(t, "after (unchanged)", argvs(p2.After), argvs(p.After))

	// A different binary: an upgrade restarts a running daemon.
	in.Binary = "/opt/cm2/claudemesh"
	p3, err := PlanInstall(in)
	if err != nil {
		t.Fatal(err)
	}
	if p3.State != StateChanged || len(p3.Files) != 1 || !bytes.Contains(p3.Files[0].Content, []byte("ExecStart=/opt/cm2/claudemesh ")) {
		t.Errorf("changed plan: state %s, files %+v", p3.State, p3.Files)
	}
	sameLines(t, "after (changed)", argvs(p3.After), []string{
		"systemctl --user daemon-reload",
		"systemctl --user try-restart claudemesh-daemon.service",
		"systemctl --user enable --now claudemesh-daemon.service",
	})
}

func TestPlanInstallEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		daemonDir, configDir string
		cwd                  string
		want                 []string
		wantErr              bool
	}{
		{name: "none", want: nil},
		{name: "daemon dir", daemonDir: "/srv/d", want: []string{`"CLAUDEMESH_DAEMON_DIR=/srv/d"`}},
		{name: "config dir", configDir: "/srv/c/", want: []string{`"CLAUDEMESH_CONFIG_DIR=/srv/c"`}},
		{name: "both", daemonDir: "/srv/d", configDir: "/srv/c", want: []string{`"CLAUDEMESH_DAEMON_DIR=/srv/d"`, `"CLAUDEMESH_CONFIG_DIR=/srv/c"`}},
		{name: "relative, cwd unknown", daemonDir: "d", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PlanInstall(Inputs{GOOS: "linux", Home: t.TempDir(), Binary: "/usr/bin/claudemesh", DaemonDir: tc.daemonDir, ConfigDir: tc.configDir, Cwd: tc.cwd})
			if tc.wantErr {
				if err == nil {
					t.Fatal("PlanInstall accepted a relative directory with no working directory")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := unitOptions(t, p.Files[0].Content)["Service"]["Environment"]
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
				t.Errorf("Environment = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPlanInstallLaunchd(t *testing.T) {
	home := t.TempDir()
	in := Inputs{GOOS: "darwin", Home: home, Binary: "/opt/homebrew/bin/claudemesh", UID: 501}
	plist := filepath.Join(home, "Library", "LaunchAgents", "com.claudemesh.daemon.plist")
	p, err := PlanInstall(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Manager != Launchd || p.Tool != "launchctl" || p.Path != plist || p.State != StateNew {
		t.Fatalf("plan %+v", p)
	}
	var dirs []string
	for _, d := range p.Dirs {
		dirs = append(dirs, fmt.Sprintf("%s %04o", d.Path, d.Mode))
	}
	// The daemon directory must exist before launchd opens daemon.log.
	sameLines(t, "dirs", dirs, []string{
		filepath.Dir(plist) + " 0755",
		filepath.Join(home, ".claudemesh", "daemon") + " 0700",
	})
	_, m := decodePlist(t, p.Files[0].Content)
	if got := m["StandardOutPath"]; got != filepath.Join(home, ".claudemesh", "daemon", "daemon.log") {
		t.Errorf("StandardOutPath %v", got)
	}
	if _, ok := m["EnvironmentVariables"]; ok {
		t.Error("EnvironmentVariables present with neither directory set")
	}
	sameLines(t, "before", argvs(p.Before), []string{})
	sameLines(t, "after", argvs(p.After), []string{
		"launchctl enable gui/501/com.claudemesh.daemon",
		"launchctl bootstrap gui/501 " + plist,
	})

	// Reinstall over an existing plist: boot the loaded job out first.
	if err := os.MkdirAll(filepath.Dir(plist), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plist, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	in.DaemonDir = "/var/cm"
	p2, err := PlanInstall(in)
	if err != nil {
		t.Fatal(err)
	}
	if p2.State != StateChanged {
		t.Errorf("state %s", p2.State)
	}
	sameLines(t, "before (reinstall)", argvs(p2.Before), []string{"launchctl bootout gui/501/com.claudemesh.daemon (ignore failure)"})
	_, m = decodePlist(t, p2.Files[0].Content)
	if got := m["StandardOutPath"]; got != "/var/cm/daemon.log" {
		t.Errorf("StandardOutPath %v with CLAUDEMESH_DAEMON_DIR=/var/cm", got)
	}
	if env, _ := m["EnvironmentVariables"].(map[string]any); env["CLAUDEMESH_DAEMON_DIR"] != "/var/cm" || len(env) != 1 {
		t.Errorf("EnvironmentVariables %v", m["EnvironmentVariables"])
	}
}

func TestPlanUninstall(t *testing.T) {
	t.Run("systemd absent", func(t *testing.T) {
		p, err := PlanUninstall(Inputs{GOOS: "linux", Home: t.TempDir()})
		if err != nil || p.State != StateAbsent || len(p.Commands()) != 0 || len(p.Remove) != 0 {
			t.Fatalf("plan %+v, %v; want an empty plan", p, err)
		}
	})
	t.Run("systemd installed and enabled", func(t *testing.T) {
		xdg := t.TempDir()
		dir := filepath.Join(xdg, "systemd", "user")
		unitPath := filepath.Join(dir, SystemdUnit)
		wants := filepath.Join(dir, "default.target.wants", SystemdUnit)
		if err := os.MkdirAll(filepath.Dir(wants), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(unitPath, []byte("[Unit]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(unitPath, wants); err != nil {
			t.Fatal(err)
		}
		p, err := PlanUninstall(Inputs{GOOS: "linux", Home: t.TempDir(), XDGConfigHome: xdg})
		if err != nil {
			t.Fatal(err)
		}
		if p.State != StateInstalled || p.Path != unitPath {
			t.Fatalf("plan %+v", p)
		}
		sameLines(t, "remove", p.Remove, []string{unitPath, wants})
		sameLines(t, "before", argvs(p.Before), []string{"systemctl --user disable --now claudemesh-daemon.service"})
		sameLines(t, "after", argvs(p.After), []string{"systemctl --user daemon-reload"})
	})
	t.Run("launchd installed", func(t *testing.T) {
		home := t.TempDir()
		plist := filepath.Join(home, "Library", "LaunchAgents", LaunchdLabel+".plist")
		if err := os.MkdirAll(filepath.Dir(plist), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(plist, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := PlanUninstall(Inputs{GOOS: "darwin", Home: home, UID: 501})
		if err != nil {
			t.Fatal(err)
		}
		sameLines(t, "remove", p.Remove, []string{plist})
		sameLines(t, "before", argvs(p.Before), []string{"launchctl bootout gui/501/com.claudemesh.daemon (ignore failure)"})
		sameLines(t, "after", argvs(p.After), []string{})
	})
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"systemctl":                  "systemctl",
		"/home/ann/x.plist":          "/home/ann/x.plist",
		"gui/501/com.claudemesh.d":   "gui/501/com.claudemesh.d",
		"/Users/a b/x.plist":         "'/Users/a b/x.plist'",
		"it's":                       `'it'\''s'`,
		"":                           "''",
		"$HOME":                      "'$HOME'",
		"--now":                      "--now",
		"claudemesh-daemon.service":  "claudemesh-daemon.service",
		"/tmp/a;rm -rf ~/claudemesh": "'/tmp/a;rm -rf ~/claudemesh'",
	} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
