package deploy

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coreos/go-systemd/v22/unit"
)

// unitOptions parses a rendered unit into section -> key -> values.
func unitOptions(t *testing.T, content []byte) map[string]map[string][]string {
	t.Helper()
	opts, err := unit.DeserializeOptions(bytes.NewReader(content))
	if err != nil {
		t.Fatalf("unit does not parse: %v\n%s", err, content)
	}
	m := map[string]map[string][]string{}
	for _, o := range opts {
		if m[o.Section] == nil {
			m[o.Section] = map[string][]string{}
		}
		m[o.Section][o.Name] = append(m[o.Section][o.Name], o.Value)
	}
	return m
}

func TestSystemdUnitContent(t *testing.T) {
	required := []struct{ section, key, value string }{
		{"Unit", "StartLimitIntervalSec", "300"},
		{"Unit", "StartLimitBurst", "5"},
		{"Service", "Type", "notify"},
		{"Service", "NotifyAccess", "main"},
		{"Service", "Restart", "on-failure"},
		{"Service", "RestartSec", "5s"},
		{"Service", "TasksMax", "128"},
		{"Service", "LimitNOFILE", "4096"},
		{"Install", "WantedBy", "default.target"},
	}
	// Journald gets the output; namespace hardening fails in user units.
	forbidden := []string{"StandardOutput", "StandardError", "PrivateTmp", "ProtectSystem", "ProtectHome", "ReadWritePaths", "User", "Group"}

	tests := []struct {
		name      string
		binary    string
		env       []EnvVar
		execStart string
		envLines  []string
	}{
		{name: "plain", binary: "/usr/local/bin/claudemesh",
			execStart: "/usr/local/bin/claudemesh daemon up --foreground"},
		{name: "space", binary: "/opt/claude mesh/bin/claudemesh",
			execStart: `"/opt/claude mesh/bin/claudemesh" daemon up --foreground`},
		{name: "percent", binary: "/opt/100%/claudemesh",
			execStart: "/opt/100%%/claudemesh daemon up --foreground"},
		{name: "semicolon", binary: "/opt/a;b/claudemesh",
			execStart: `"/opt/a;b/claudemesh" daemon up --foreground`},
		{name: "daemon dir only", binary: "/usr/bin/claudemesh",
			env:       []EnvVar{{"CLAUDEMESH_DAEMON_DIR", "/srv/cm daemon"}},
			execStart: "/usr/bin/claudemesh daemon up --foreground",
			envLines:  []string{`"CLAUDEMESH_DAEMON_DIR=/srv/cm daemon"`}},
		{name: "both dirs", binary: "/usr/bin/claudemesh",
			env:       []EnvVar{{"CLAUDEMESH_DAEMON_DIR", "/srv/d"}, {"CLAUDEMESH_CONFIG_DIR", `/srv/c%"\`}},
			execStart: "/usr/bin/claudemesh daemon up --foreground",
			envLines:  []string{`"CLAUDEMESH_DAEMON_DIR=/srv/d"`, `"CLAUDEMESH_CONFIG_DIR=/srv/c%%\"\\"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			content, err := RenderSystemd(Unit{Binary: tc.binary, Environment: tc.env})
			if err != nil {
				t.Fatal(err)
			}
			m := unitOptions(t, content)
			for _, r := range required {
				if got := m[r.section][r.key]; len(got) != 1 || got[0] != r.value {
					t.Errorf("[%s] %s = %q, want exactly %q", r.section, r.key, got, r.value)
				}
			}
			for section, keys := range m {
				for _, k := range forbidden {
					if _, ok := keys[k]; ok {
						t.Errorf("[%s] has %s", section, k)
					}
				}
			}
			if got := m["Service"]["ExecStart"]; len(got) != 1 || got[0] != tc.execStart {
				t.Errorf("ExecStart = %q, want %q", got, tc.execStart)
			}
			if got := m["Service"]["Environment"]; fmt.Sprint(got) != fmt.Sprint(tc.envLines) {
				t.Errorf("Environment = %q, want %q", got, tc.envLines)
			}
		})
	}
}

func TestRenderRejectsUnwritablePaths(t *testing.T) {
	for _, tc := range []struct {
		name string
		u    Unit
		both bool // launchd refuses it too
	}{
		{"relative binary", Unit{Binary: "bin/claudemesh"}, true},
		{"newline", Unit{Binary: "/opt/a\nb/claudemesh"}, true},
		{"invalid utf-8", Unit{Binary: "/opt/\xff/claudemesh"}, true},
		{"relative env", Unit{Binary: "/usr/bin/claudemesh", Environment: []EnvVar{{"CLAUDEMESH_DAEMON_DIR", "d"}}}, true},
		{"dollar (systemd only)", Unit{Binary: "/opt/$HOME/claudemesh"}, false},
		{"double quote (systemd only)", Unit{Binary: `/opt/a"b/claudemesh`}, false},
		{"single quote (systemd only)", Unit{Binary: "/opt/it's/claudemesh"}, false},
		{"backslash (systemd only)", Unit{Binary: `/opt/a\b/claudemesh`}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := RenderSystemd(tc.u); !errors.Is(err, ErrBadPath) {
				t.Errorf("RenderSystemd error = %v, want ErrBadPath", err)
			}
			u := tc.u
			u.LogFile, u.WorkingDirectory = "/home/u/.claudemesh/daemon/daemon.log", "/home/u"
			if _, err := RenderLaunchd(u); errors.Is(err, ErrBadPath) != tc.both || (err != nil) != tc.both {
				t.Errorf("RenderLaunchd error = %v, want ErrBadPath: %v", err, tc.both)
			}
		})
	}
}

// TestSystemdAnalyzeVerify runs the real `systemd-analyze verify --user` on
// rendered units whose binary exists, including awkward paths, and on one
// whose binary does not (which must fail, proving the check checks).
func TestSystemdAnalyzeVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" && ciRunInstallsSystemd(t) {
			t.Fatal("systemd-analyze is not on PATH although .ci/run installs it")
		}
		t.Log("systemd-analyze is not on PATH: the unit was checked by the structural assertions only")
		return
	}
	root := t.TempDir()
	verify := func(t *testing.T, u Unit) (string, error) {
		t.Helper()
		content, err := RenderSystemd(u)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		runtime := filepath.Join(dir, "run")
		if err := os.Mkdir(runtime, 0o700); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, SystemdUnit)
		if err := os.WriteFile(file, content, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(analyze, "verify", "--user", file)
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_RUNTIME_DIR="+runtime, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "SYSTEMD_LOG_LEVEL=notice")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, name := range []string{"plain", "with space", "100%", "semi;colon", "[brackets] & {braces} #hash"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(root, name)
			bin := filepath.Join(dir, "claudemesh")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := verify(t, Unit{Binary: bin, Environment: []EnvVar{
				{"CLAUDEMESH_DAEMON_DIR", filepath.Join(dir, "d 1%")},
				{"CLAUDEMESH_CONFIG_DIR", filepath.Join(dir, "c")},
			}})
			if err != nil {
				t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
			}
			// verify exits 0 on warnings (an unknown key, a key in the wrong
			// section): any line about our unit is a failure.
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, SystemdUnit) {
					t.Errorf("systemd-analyze verify warns: %s", line)
				}
			}
		})
	}
	t.Run("missing binary fails", func(t *testing.T) {
		out, err := verify(t, Unit{Binary: filepath.Join(root, "no such", "claudemesh")})
		if err == nil || !strings.Contains(out, "no such") {
			t.Fatalf("verify of a unit with a missing binary: err %v, output:\n%s", err, out)
		}
	})
}

// ciRunInstallsSystemd: whether the project's CI script provisions
// systemd-analyze (it does not yet; then a missing tool is not a CI failure).
func ciRunInstallsSystemd(t *testing.T) bool {
	b, err := os.ReadFile(filepath.Join("..", ".ci", "run"))
	if err != nil {
		t.Logf("read .ci/run: %v", err)
		return false
	}
	return strings.Contains(string(b), "systemd-analyze") || strings.Contains(string(b), "apt_install systemd")
}

// plistValue is a decoded property-list value: string, bool, []any or
// map[string]any.
func decodePlist(t *testing.T, content []byte) (doctype string, top map[string]any) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(content))
	dec.Strict = true
	var stack []any
	var keys []string // pending key per open dict
	var text strings.Builder
	var root any
	push := func(v any) {
		if len(stack) == 0 {
			root = v
			return
		}
		switch parent := stack[len(stack)-1].(type) {
		case *[]any:
			*parent = append(*parent, v)
		case map[string]any:
			k := keys[len(keys)-1]
			if k == "" {
				t.Fatalf("dict value %v without a key", v)
			}
			parent[k] = v
			keys[len(keys)-1] = ""
		}
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("plist is not well-formed XML: %v\n%s", err, content)
		}
		switch tok := tok.(type) {
		case xml.Directive:
			doctype = string(tok)
		case xml.StartElement:
			text.Reset()
			switch tok.Name.Local {
			case "dict":
				stack = append(stack, map[string]any{})
				keys = append(keys, "")
			case "array":
				stack = append(stack, &[]any{})
			}
		case xml.CharData:
			text.Write(tok)
		case xml.EndElement:
			switch tok.Name.Local {
			case "dict":
				v := stack[len(stack)-1]
				stack, keys = stack[:len(stack)-1], keys[:len(keys)-1]
				push(v)
			case "array":
				v := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				push(*v.(*[]any))
			case "key":
				keys[len(keys)-1] = text.String()
			case "string":
				push(text.String())
			case "true":
				push(true)
			case "false":
				push(false)
			case "plist":
			default:
				t.Fatalf("unexpected element <%s>", tok.Name.Local)
			}
		}
	}
	m, ok := root.(map[string]any)
	if !ok {
		t.Fatalf("plist root is %T, want a dict", root)
	}
	return doctype, m
}

func TestLaunchdPlist(t *testing.T) {
	tests := []struct {
		name    string
		binary  string
		home    string
		env     []EnvVar
		wantEnv map[string]any
		raw     []string // substrings of the raw XML
	}{
		{name: "plain", binary: "/usr/local/bin/claudemesh", home: "/Users/ann"},
		{name: "xml specials", binary: `/Users/a&b/<x>/"q'/claudemesh`, home: "/Users/a&b",
			env:     []EnvVar{{"CLAUDEMESH_DAEMON_DIR", "/Users/a&b/d<1>"}, {"CLAUDEMESH_CONFIG_DIR", "/Users/a&b/c"}},
			wantEnv: map[string]any{"CLAUDEMESH_DAEMON_DIR": "/Users/a&b/d<1>", "CLAUDEMESH_CONFIG_DIR": "/Users/a&b/c"},
			raw:     []string{"/Users/a&amp;b/&lt;x&gt;/", "d&lt;1&gt;"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log := filepath.Join(tc.home, ".claudemesh", "daemon", "daemon.log")
			content, err := RenderLaunchd(Unit{Binary: tc.binary, Environment: tc.env, LogFile: log, WorkingDirectory: tc.home})
			if err != nil {
				t.Fatal(err)
			}
			doctype, m := decodePlist(t, content)
			if !strings.HasPrefix(string(content), `<?xml version="1.0" encoding="UTF-8"?>`) {
				t.Error("no XML declaration first")
			}
			if want := `DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd"`; doctype != want {
				t.Errorf("doctype %q, want %q", doctype, want)
			}
			want := map[string]any{
				"Label":             LaunchdLabel,
				"ProgramArguments":  []any{tc.binary, "daemon", "up", "--foreground"},
				"RunAtLoad":         true,
				"KeepAlive":         map[string]any{"SuccessfulExit": false},
				"StandardOutPath":   log,
				"StandardErrorPath": log,
				"WorkingDirectory":  tc.home,
			}
			if tc.wantEnv != nil {
				want["EnvironmentVariables"] = tc.wantEnv
			}
			if fmt.Sprintf("%#v", m) != fmt.Sprintf("%#v", want) {
				t.Errorf("plist\n got %#v\nwant %#v", m, want)
			}
			for _, s := range tc.raw {
				if !strings.Contains(string(content), s) {
					t.Errorf("raw plist lacks %q", s)
				}
			}
			if plutil, err := exec.LookPath("plutil"); err == nil {
				f := filepath.Join(t.TempDir(), LaunchdLabel+".plist")
				if err := os.WriteFile(f, content, 0o644); err != nil {
					t.Fatal(err)
				}
				if out, err := exec.Command(plutil, "-lint", f).CombinedOutput(); err != nil {
					t.Errorf("plutil -lint: %v\n%s", err, out)
				}
			}
		})
	}
}
