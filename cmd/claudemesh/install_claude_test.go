package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// claudeHome points HOME at a fresh directory (and unsets
// CLAUDE_CONFIG_DIR) and returns the path of its .claude.json.
func claudeHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	return filepath.Join(home, ".claude.json")
}

// wantEntry is the entry install writes for this (test) binary.
func wantEntry(t *testing.T) map[string]any {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		t.Fatal(err)
	}
	return map[string]any{"type": "stdio", "command": exe, "args": []any{"mcp"}, "env": map[string]any{}}
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return m
}

func TestInstallClaudeCodeFresh(t *testing.T) {
	path := claudeHome(t)
	if err := (&installClaudeCodeCmd{}).Run(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v", path, err, st.Mode())
	}
	got := readJSON(t, path)
	want := map[string]any{"mcpServers": map[string]any{"claudemesh": wantEntry(t)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if err := (&uninstallClaudeCodeCmd{}).Run(); err != nil {
		t.Fatal(err)
	}
	if got := readJSON(t, path); !reflect.DeepEqual(got, map[string]any{"mcpServers": map[string]any{}}) {
		t.Fatalf("after uninstall: %v", got)
	}
}

// existing is a configuration with other servers and keys, in Claude
// Code's layout, with values whose form must survive (a big integer, an
// escaped string, key order).
const existing = `{
  "numStartups": 12345678901234567890,
  "theme": "dark\u00e9",
  "projects": {
    "/home/u/p": {
      "mcpServers": {
        "local-one": {
          "command": "x"
        }
      }
    }
  },
  "mcpServers": {
    "github": {
      "type": "stdio",
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-github"
      ],
      "env": {
        "TOKEN": "t"
      }
    },
    "zeta": {
      "type": "http",
      "url": "https://example.com/mcp"
    }
  },
  "zLast": [
    1.50,
    null
  ]
}
`

func TestInstallClaudeCodeKeepsEverythingElse(t *testing.T) {
	path := claudeHome(t)
	if err := os.WriteFile(path, []byte(existing), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := (&installClaudeCodeCmd{}).Run(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want the file's 0640 kept", st.Mode().Perm())
	}
	entry, _ := json.MarshalIndent(wantEntry(t), "    ", "  ")
	want := strings.Replace(existing, "\n  },\n  \"zLast\"", ",\n    \"claudemesh\": "+string(entry)+"\n  },\n  \"zLast\"", 1)
	if got := string(b); !sameJSONText(t, got, want) || !strings.Contains(got, "12345678901234567890") || !strings.Contains(got, `"dark\u00e9"`) ||
		!strings.Contains(got, "1.50") {
		t.Fatalf("after install:\n%s\nwant:\n%s", got, want)
	}
	if strings.Index(string(b), `"numStartups"`) > strings.Index(string(b), `"theme"`) ||
		strings.Index(string(b), `"github"`) > strings.Index(string(b), `"zeta"`) ||
		strings.Index(string(b), `"zeta"`) > strings.Index(string(b), `"claudemesh"`) {
		t.Errorf("key order changed:\n%s", b)
	}

	// A second run changes nothing, not even the file's time.
	before, _ := os.Stat(path)
	if err := (&installClaudeCodeCmd{}).Run(); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(path)
	after, _ := os.Stat(path)
	if string(again) != string(b) || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("a second install rewrote the file")
	}

	// Uninstall gives back the original, byte for byte (it was already in
	// Claude Code's two-space layout).
	if err := (&uninstallClaudeCodeCmd{}).Run(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != existing {
		t.Errorf("after uninstall:\n%s\nwant the original:\n%s", got, existing)
	}
	if err := (&uninstallClaudeCodeCmd{}).Run(); err != nil {
		t.Fatalf("a second uninstall: %v", err)
	}
}

// sameJSONText compares two documents as JSON values.
func sameJSONText(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return reflect.DeepEqual(x, y)
}

func TestInstallClaudeCodeDryRun(t *testing.T) {
	path := claudeHome(t)
	if err := (&installClaudeCodeCmd{DryRun: true}).Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a dry run created %s: %v", path, err)
	}
	if err := os.WriteFile(path, []byte(existing), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (&installClaudeCodeCmd{DryRun: true}).Run(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != existing {
		t.Fatalf("a dry run wrote:\n%s", b)
	}
	if err := (&installClaudeCodeCmd{}).Run(); err != nil {
		t.Fatal(err)
	}
	installed, _ := os.ReadFile(path)
	if err := (&uninstallClaudeCodeCmd{DryRun: true}).Run(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != string(installed) {
		t.Fatalf("a dry uninstall wrote:\n%s", b)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 2 || entries[0].Name() != ".claude" { // .claude/settings.json: the hooks (hook_install_test.go)
		t.Errorf("files beside .claude.json: %v", entries)
	}
}

func TestInstallClaudeCodeRefusesInvalidJSON(t *testing.T) {
	for _, doc := range []string{`{"mcpServers": {`, `[1, 2]`, `{"mcpServers": []}`, `{"a": 1} {"b": 2}`} {
		path := claudeHome(t)
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, run := range []func() error{(&installClaudeCodeCmd{}).Run, (&uninstallClaudeCodeCmd{}).Run} {
			err := run()
			if err == nil || !strings.Contains(err.Error(), "nothing was changed") || !strings.Contains(err.Error(), path) {
				t.Errorf("%q: %v", doc, err)
			}
		}
		if b, _ := os.ReadFile(path); string(b) != doc {
			t.Errorf("%q was changed to %q", doc, b)
		}
	}
}

// TestInstallClaudeCodeAllOrNothing: when settings.json cannot be edited,
// neither file is written: ~/.claude.json is not left with the server
// registered and no hooks (or, uninstalling, the other way round).
func TestInstallClaudeCodeAllOrNothing(t *testing.T) {
	for _, run := range []func() error{(&installClaudeCodeCmd{}).Run, (&uninstallClaudeCodeCmd{}).Run} {
		path := claudeHome(t)
		const config = `{"mcpServers": {"claudemesh": {"type": "stdio", "command": "old"}}}`
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		settings := claudeSettingsIn(t, filepath.Dir(path), `{"hooks": []}`)
		if err := run(); err == nil || !strings.Contains(err.Error(), settings) || !strings.Contains(err.Error(), "nothing was changed") {
			t.Errorf("with a settings.json whose hooks is a list: %v", err)
		}
		if b, _ := os.ReadFile(path); string(b) != config {
			t.Errorf("~/.claude.json was changed to %s", b)
		}
	}
}

func TestInstallClaudeCodeFollowsSymlink(t *testing.T) {
	path := claudeHome(t)
	target := filepath.Join(t.TempDir(), "dotfiles-claude.json")
	if err := os.WriteFile(target, []byte(`{"theme":"light"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if err := (&installClaudeCodeCmd{}).Run(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v", err)
	}
	if got := readJSON(t, target); got["theme"] != "light" || got["mcpServers"] == nil {
		t.Fatalf("the linked file: %v", got)
	}
}

// handFormatted are settings.json files laid out by hand — four spaces,
// tabs and CRLF, one line, spaced colons — with settings and hooks of
// their own (a SessionEnd and a PreToolUse the receiver joins).
var handFormatted = map[string]string{
	"four spaces": `{
    "model": "opus",
    "hooks": {
        "PreToolUse": [
            { "matcher": "Bash", "hooks": [ { "type": "command", "command": "~/bin/guard.sh" } ] }
        ],
        "SessionEnd": [
            {
                "hooks": [{"type": "command", "command": "echo bye"}]
            }
        ]
    },
    "env": {"A": "1"}
}
`,
	"tabs and CRLF": "{\r\n\t\"theme\": \"dark\",\r\n\t\"permissions\": {\r\n\t\t\"allow\": [\r\n\t\t\t\"Bash(ls:*)\"\r\n\t\t]\r\n\t}\r\n}\r\n",
	"one line":      `{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"notify-send done"}]}]},"theme":"light"}`,
	"spaced colons": "{\n  \"model\" : \"sonnet\" ,\n  \"env\" : { }\n}",
}

// TestInstallClaudeCodeRoundTripBytes: install claude-code edits a
// hand-formatted settings.json and ~/.claude.json in place, laying out
// what it adds as the file is laid out, and uninstall claude-code gives
// back both files byte for byte.
func TestInstallClaudeCodeRoundTripBytes(t *testing.T) {
	const config = "{\n    \"numStartups\": 3,\n    \"mcpServers\": {\n        \"github\": {\"type\": \"stdio\", \"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-github\"]}\n    },\n    \"tipsHistory\": {}\n}"
	for name, settings := range handFormatted {
		t.Run(name, func(t *testing.T) {
			configPath := claudeHome(t)
			if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
				t.Fatal(err)
			}
			settingsPath := claudeSettingsIn(t, filepath.Dir(configPath), settings)
			if err := (&installClaudeCodeCmd{}).Run(); err != nil {
				t.Fatal(err)
			}
			installed, _ := os.ReadFile(settingsPath)
			if got := len(hooksOf(t, settingsPath)); got < len(claudeHookEvents) {
				t.Fatalf("%d events hooked, want %d:\n%s", got, len(claudeHookEvents), installed)
			}
			cfg, _ := os.ReadFile(configPath)
			if !strings.Contains(string(cfg), "\n        \"claudemesh\": {\n            \"type\": \"stdio\",\n") {
				t.Errorf("the server entry is not laid out as its neighbours:\n%s", cfg)
			}
			if name == "four spaces" && !regexp.MustCompile(`\n {24}"command": ".* Stop",\n`).Match(installed) {
				t.Errorf("the hooks are not laid out in four spaces:\n%s", installed)
			}
			if name == "tabs and CRLF" && (strings.Count(string(installed), "\n") != strings.Count(string(installed), "\r\n") ||
				!strings.Contains(string(installed), "\r\n\t\t\"Stop\": [\r\n\t\t\t{\r\n")) {
				t.Errorf("the hooks are not laid out in tabs and CRLF:\n%q", installed)
			}
			if err := (&uninstallClaudeCodeCmd{}).Run(); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(settingsPath); string(got) != settings {
				t.Errorf("settings.json after the round trip:\n%q\nwant the original:\n%q", got, settings)
			}
			if got, _ := os.ReadFile(configPath); string(got) != config {
				t.Errorf(".claude.json after the round trip:\n%q\nwant the original:\n%q", got, config)
			}
		})
	}
}
