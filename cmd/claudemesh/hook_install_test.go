package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/cmd/claudemesh/internal/jsonedit"
)

// claudeSettings points HOME at a fresh directory (CLAUDE_CONFIG_DIR
// unset) and returns the path of its .claude/settings.json, with doc
// written there unless doc is "".
func claudeSettings(t *testing.T, doc string) string {
	t.Helper()
	claudeHome(t)
	return claudeSettingsIn(t, os.Getenv("HOME"), doc)
}

// claudeSettingsIn writes doc ("": nothing) as home's Claude Code
// settings.json and returns its path.
func claudeSettingsIn(t *testing.T, home, doc string) string {
	t.Helper()
	path := filepath.Join(home, ".claude", "settings.json")
	if doc != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// otherHooks is a settings.json with hooks of its own on events the
// receiver uses (one group matching Bash, one group mixing a formatter
// with an old claudemesh receiver at another path) and on one it does not,
// plus other settings whose form must survive.
const otherHooks = `{
  "model": "opus",
  "permissions": {
    "allow": [
      "Bash(go test:*)"
    ]
  },
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "~/bin/guard.sh",
            "timeout": 5
          }
        ]
      }
    ],
    "PostToolUse": [
      {
        "matcher": "Edit|Write",
        "hooks": [
          {
            "type": "command",
            "command": "gofmt -w \"$CLAUDE_PROJECT_DIR\""
          },
          {
            "type": "command",
            "command": "'/old place/claudemesh' hook PostToolUse"
          }
        ]
      }
    ],
    "PreCompact": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "echo compacting"
          }
        ]
      }
    ]
  },
  "zLast": 12345678901234567890
}
`

// hooksOf decodes settings.json's hooks: event → groups.
func hooksOf(t *testing.T, path string) map[string][]struct {
	Matcher string       `json:"matcher"`
	Hooks   []claudeHook `json:"hooks"`
} {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Hooks map[string][]struct {
			Matcher string       `json:"matcher"`
			Hooks   []claudeHook `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	return doc.Hooks
}

// commands lists every hook command of an event, group by group.
func commands(t *testing.T, path, event string) []string {
	t.Helper()
	var out []string
	for _, g := range hooksOf(t, path)[event] {
		for _, h := range g.Hooks {
			out = append(out, g.Matcher+" → "+h.Command)
		}
	}
	return out
}

func TestHookInstallKeepsOtherHooks(t *testing.T) {
	path := claudeSettings(t, otherHooks)
	exe, err := installedBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := (&hookInstallCmd{}).Run(); err != nil {
		t.Fatal(err)
	}
	q := shellQuote(exe)
	want := map[string][]string{
		"PreToolUse":   {"Bash → ~/bin/guard.sh", "* → " + q + " hook PreToolUse"},
		"PostToolUse":  {`Edit|Write → gofmt -w "$CLAUDE_PROJECT_DIR"`, "Edit|Write → " + q + " hook PostToolUse"},
		"PreCompact":   {" → echo compacting"},
		"SessionStart": {" → " + q + " hook SessionStart"},
		"Stop":         {" → " + q + " hook Stop"},
		"SubagentStop": {" → " + q + " hook SubagentStop"},
		"Notification": {" → " + q + " hook Notification"},
	}
	for event, w := range want {
		if got := commands(t, path, event); !slices.Equal(got, w) {
			t.Errorf("%s: %q, want %q", event, got, w)
		}
	}
	if h := hooksOf(t, path)["PreToolUse"][0].Hooks[0]; h.Timeout != 5 {
		t.Errorf("the guard's timeout was changed: %+v", h)
	}
	after, _ := os.ReadFile(path)
	var doc map[string]any
	_ = json.Unmarshal(after, &doc)
	if doc["model"] != "opus" || !strings.Contains(string(after), "12345678901234567890") ||
		!strings.Contains(string(after), `"Bash(go test:*)"`) {
		t.Fatalf("other settings changed:\n%s", after)
	}
	keys := topKeys(t, after)
	if !slices.Equal(keys, []string{"model", "permissions", "hooks", "zLast"}) {
		t.Errorf("key order %v", keys)
	}
	// Twice changes nothing, not even a byte.
	if err := (&hookInstallCmd{}).Run(); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, after) {
		t.Fatalf("a second install changed the file:\n%s", again)
	}
	// Uninstall takes out ours and nothing else.
	if err := (&hookUninstallCmd{}).Run(); err != nil {
		t.Fatal(err)
	}
	left := hooksOf(t, path)
	if got := commands(t, path, "PostToolUse"); !slices.Equal(got, []string{`Edit|Write → gofmt -w "$CLAUDE_PROJECT_DIR"`}) {
		t.Errorf("PostToolUse after uninstall: %q", got)
	}
	if len(left) != 3 || left["Stop"] != nil {
		t.Errorf("after uninstall: %v", left)
	}
	if err := (&hookUninstallCmd{}).Run(); err != nil {
		t.Fatal(err)
	}
}

func topKeys(t *testing.T, doc []byte) []string {
	t.Helper()
	d, err := jsonedit.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range d.Root().Members {
		keys = append(keys, m.Key)
	}
	return keys
}

// TestHookInstallFresh: no settings.json, no ~/.claude: install makes
// both; uninstall leaves an empty object.
func TestHookInstallFresh(t *testing.T) {
	path := claudeSettings(t, "")
	if err := (&hookInstallCmd{DryRun: true}).Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Fatalf("a dry run created %s", filepath.Dir(path))
	}
	if err := (&hookInstallCmd{}).Run(); err != nil {
		t.Fatal(err)
	}
	if got := len(hooksOf(t, path)); got != len(claudeHookEvents) {
		t.Fatalf("%d events, want %d", got, len(claudeHookEvents))
	}
	if err := (&hookUninstallCmd{}).Run(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) != "{}" {
		t.Fatalf("after uninstall: %s", b)
	}
}

// TestHookInstallNullHooks: "hooks": null is no hooks, not a refusal.
func TestHookInstallNullHooks(t *testing.T) {
	path := claudeSettings(t, `{"hooks": null, "model": "opus"}`)
	if err := (&hookUninstallCmd{}).Run(); err != nil {
		t.Fatal(err)
	}
	if err := (&hookInstallCmd{}).Run(); err != nil {
		t.Fatal(err)
	}
	if got := len(hooksOf(t, path)); got != len(claudeHookEvents) {
		t.Fatalf("%d events, want %d", got, len(claudeHookEvents))
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), `"model": "opus"`) {
		t.Fatalf("the other settings: %s", b)
	}
}

func TestHookInstallRefusesInvalid(t *testing.T) {
	for _, doc := range []string{`{"hooks": `, `[]`, `{"hooks": []}`, `{"hooks": {"Stop": {}}}`} {
		path := claudeSettings(t, doc)
		for _, run := range []func() error{(&hookInstallCmd{}).Run, (&hookUninstallCmd{}).Run} {
			if err := run(); err == nil || !strings.Contains(err.Error(), "nothing was changed") {
				t.Errorf("%q: %v", doc, err)
			}
		}
		if b, _ := os.ReadFile(path); string(b) != doc {
			t.Errorf("%q was changed to %q", doc, b)
		}
	}
}

func TestShellWords(t *testing.T) {
	cases := map[string][]string{
		`claudemesh hook Stop`:                  {"claudemesh", "hook", "Stop"},
		`'/a b/claudemesh' hook Stop`:           {"/a b/claudemesh", "hook", "Stop"},
		`"/a \"b\"/claudemesh" hook`:            {`/a "b"/claudemesh`, "hook"},
		`/x/it\'s/claudemesh  hook`:             {"/x/it's/claudemesh", "hook"},
		shellQuote("/o'd/claudemesh") + " hook": {"/o'd/claudemesh", "hook"},
	}
	for in, want := range cases {
		if got := shellWords(in); !reflect.DeepEqual(got, want) {
			t.Errorf("shellWords(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDiffHunks(t *testing.T) {
	a := strings.Split("a b c d e f g h i j k l", " ")
	b := strings.Split("a b C d e f g h i j k l m", " ")
	got := strings.Join(diffHunks(a, b, 1), "")
	want := "@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n@@ -12,1 +12,2 @@\n l\n+m\n"
	if got != want {
		t.Fatalf("diff\n%s\nwant\n%s", got, want)
	}
}

// TestHookInstallPrefersLeanReceiver: with claudemesh-hook installed beside
// claudemesh, the hooks run it; installing so over hooks of the older form
// (`claudemesh hook <event>`) replaces them, one receiver per event.
func TestHookInstallPrefersLeanReceiver(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "claudemesh")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := hookReceiver(exe); got != exe+" hook" {
		t.Fatalf("without claudemesh-hook: %q", got)
	}
	lean := filepath.Join(dir, leanReceiver)
	if err := os.WriteFile(lean, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := hookReceiver(exe); got != exe+" hook" {
		t.Fatalf("with a claudemesh-hook that is not executable: %q", got)
	}
	if err := os.Chmod(lean, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := hookReceiver(exe); got != lean {
		t.Fatalf("with claudemesh-hook: %q", got)
	}
	old, _, err := setClaudeHooks(nil, exe+" hook")
	if err != nil {
		t.Fatal(err)
	}
	path := claudeSettings(t, string(old))
	if err := editClaudeHooks(exe, false); err != nil {
		t.Fatal(err)
	}
	if got := commands(t, path, "Stop"); !slices.Equal(got, []string{" → " + lean + " Stop"}) {
		t.Fatalf("Stop after install: %q", got)
	}
	if err := editClaudeHooks("", false); err != nil {
		t.Fatal(err)
	}
	if got := hooksOf(t, path); len(got) != 0 {
		t.Fatalf("after uninstall: %v", got)
	}
}
