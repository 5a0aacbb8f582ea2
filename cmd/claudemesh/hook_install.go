package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/claudemesh/claudemesh-go/cmd/claudemesh/internal/jsonedit"
)

type hookInstallCmd struct {
	DryRun bool `name:"dry-run" help:"Print the change as a diff and write nothing."`
}

type hookUninstallCmd struct {
	DryRun bool `name:"dry-run" help:"Print the change as a diff and write nothing."`
}

func (c *hookInstallCmd) Run() error {
	exe, err := installedBinary()
	if err != nil {
		return err
	}
	return editClaudeHooks(exe, c.DryRun)
}

func (c *hookUninstallCmd) Run() error { return editClaudeHooks("", c.DryRun) }

// claudeHookEvents are the Claude Code events the receiver is installed
// for, in the order they are added; the tool events take a matcher ("*":
// every tool).
var claudeHookEvents = []struct {
	name    string
	matcher bool
}{
	{"SessionStart", false}, {"UserPromptSubmit", false}, {"PreToolUse", true}, {"PostToolUse", true},
	{"Notification", false}, {"Stop", false}, {"SubagentStop", false}, {"SessionEnd", false},
}

// hookTimeout bounds the receiver in Claude Code's hook runner (seconds);
// it finishes in milliseconds, or waits at most its busy timeout.
const hookTimeout = 10

// claudeHook is one command hook in Claude Code's settings.json format.
type claudeHook struct {
	Type    string `json:"type"`
	Command string `json:"command"`
	Timeout int    `json:"timeout,omitempty"`
}

// claudeSettingsPath is Claude Code's user settings file:
// $CLAUDE_CONFIG_DIR/settings.json when that is set, else
// ~/.claude/settings.json.
func claudeSettingsPath() (string, error) {
	if dir := os.Getenv("CLAUDE_CONFIG_DIR"); dir != "" {
		return filepath.Join(dir, "settings.json"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot find Claude Code's settings: %w", err)
	}
	return filepath.Join(home, ".claude", "settings.json"), nil
}

// installedBinary is this binary's path, symlinks resolved, with a warning
// when it is a temporary build.
func installedBinary() (string, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "", fmt.Errorf("the path of this binary: %w", err)
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		fmt.Fprintf(os.Stderr, "claudemesh: warning: %s is a temporary build (go run); install the binaries (go install ./cmd/...) and run install from them\n", exe)
	}
	return exe, nil
}

// editClaudeHooks installs the receiver of exe into Claude Code's settings
// ("" uninstalls it), keeping every other setting and hook, and says what
// it did; dry, it prints the diff and writes nothing.
func editClaudeHooks(exe string, dry bool) error {
	e, err := planClaudeHooks(exe)
	if err != nil {
		return err
	}
	return e.apply(dry)
}

// hooksEdit is editClaudeHooks's edit of the settings file, worked out
// before anything is written (install claude-code plans its two edits,
// then applies them).
type hooksEdit struct {
	path     string
	doc, out []byte
	exists   bool
	changed  bool
	install  bool
}

// planClaudeHooks reads Claude Code's settings and works out the edit; a
// file it cannot edit is an error, and nothing is written.
func planClaudeHooks(exe string) (*hooksEdit, error) {
	path, err := claudeSettingsPath()
	if err != nil {
		return nil, err
	}
	e := &hooksEdit{install: exe != ""}
	if e.path, e.doc, e.exists, err = readEdited(path); err != nil { // install_claude.go
		return nil, err
	}
	receiver := ""
	if exe != "" {
		receiver = hookReceiver(exe)
	}
	if e.out, e.changed, err = setClaudeHooks(e.doc, receiver); err != nil {
		return nil, fmt.Errorf("%s: %w; nothing was changed", e.path, err)
	}
	return e, nil
}

// apply writes the edit and says what it did; dry, it prints the diff and
// writes nothing.
func (e *hooksEdit) apply(dry bool) error {
	switch {
	case !e.changed && e.install:
		fmt.Printf("hooks already installed in %s\n", e.path)
		return nil
	case !e.changed:
		fmt.Printf("no claudemesh hooks in %s\n", e.path)
		return nil
	case dry:
		fmt.Printf("would change %s:\n", e.path)
		printDiff(os.Stdout, e.path, e.doc, e.out)
		return nil
	}
	if !e.exists {
		if err := os.MkdirAll(filepath.Dir(e.path), 0o700); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(e.path), err)
		}
	}
	if err := writeEdited(e.path, e.out, e.exists); err != nil {
		return err
	}
	verb := map[bool]string{true: "installed in", false: "removed from"}[e.install]
	fmt.Printf("claudemesh hooks %s %s:\n", verb, e.path)
	printDiff(os.Stdout, e.path, e.doc, e.out)
	return nil
}

// leanReceiver is the receiver's own binary (cmd/claudemesh-hook), which
// starts in a third of claudemesh's time.
const leanReceiver = "claudemesh-hook"

// hookReceiver is the command line that runs the receiver of exe, before
// the event's name: claudemesh-hook when it is installed beside exe, else
// `exe hook`.
func hookReceiver(exe string) string {
	if lean := sibling(exe, leanReceiver); lean != "" {
		return shellQuote(lean)
	}
	return shellQuote(exe) + " hook"
}

// sibling is the path of the program name installed beside exe (a
// regular, executable file), or "".
func sibling(exe, name string) string {
	path := filepath.Join(filepath.Dir(exe), name)
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return path
	}
	return ""
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:@%=,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// isOurHook reports whether a settings.json hook runs the claudemesh
// receiver (`claudemesh-hook <event>`, or `claudemesh* hook <event>`, any
// event): what install replaces and uninstall removes.
func isOurHook(raw json.RawMessage) bool {
	var h claudeHook
	if json.Unmarshal(raw, &h) != nil || h.Type != "command" {
		return false
	}
	words := shellWords(h.Command)
	if len(words) >= 2 && filepath.Base(words[0]) == leanReceiver {
		return true
	}
	return len(words) >= 2 && strings.HasPrefix(filepath.Base(words[0]), "claudemesh") && words[1] == "hook" &&
		(len(words) < 3 || words[2] != "install" && words[2] != "uninstall")
}

// shellWords splits a command line into words, honouring single and
// double quotes and backslashes (enough for the commands install writes
// and their hand-edited look-alikes).
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	in, quote, escaped := false, rune(0), false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped, in = false, true
		case r == '\\' && quote != '\'':
			escaped = true
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if in {
				words, in = append(words, cur.String()), false
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// setClaudeHooks returns doc (Claude Code's settings.json; empty: an empty
// object) with the receiver (hookReceiver's command line) installed for
// every event of claudeHookEvents, or with every claudemesh receiver
// removed when receiver is "". The document is edited in place
// (jsonedit): every other key, hook and matcher group keeps its bytes,
// and what install adds, uninstall takes out to the byte. changed is
// false when doc already says what was asked, and then out is nil.
func setClaudeHooks(doc []byte, receiver string) (out []byte, changed bool, err error) {
	d, err := editableObject(doc) // install_claude.go
	if err != nil {
		return nil, false, err
	}
	switch hooks := d.Get("hooks"); {
	case hooks != nil && hooks.Kind != jsonedit.Object && hooks.Kind != jsonedit.Null:
		return nil, false, errors.New("its hooks is not a JSON object")
	case receiver == "" && (hooks == nil || hooks.Kind == jsonedit.Null):
		return nil, false, nil // none, so none of ours
	case hooks == nil || hooks.Kind == jsonedit.Null:
		if err := d.Set([]byte("{}"), "hooks"); err != nil {
			return nil, false, err
		}
	}
	emptied := false
	for _, ev := range claudeHookEvents {
		var want json.RawMessage
		if receiver != "" {
			want, _ = json.Marshal(&claudeHook{Type: "command", Command: receiver + " " + ev.name, Timeout: hookTimeout})
		}
		gone, err := setEventHook(d, ev.name, ev.matcher, want)
		if err != nil {
			return nil, false, err
		}
		emptied = emptied || gone
	}
	if emptied && len(d.Get("hooks").Members) == 0 {
		if err := d.Delete("hooks"); err != nil {
			return nil, false, err
		}
	}
	if bytes.Equal(d.Bytes(), doc) {
		return nil, false, nil
	}
	return d.Bytes(), true, nil
}

// hookSpot is where a claudemesh receiver stands in hooks.<event>: its
// matcher group and its place in the group's hooks.
type hookSpot struct{ group, hook int }

// setEventHook makes the matcher groups of hooks.<event> hold exactly one
// claudemesh receiver, want (nil: none). An existing one is replaced where
// it is (left as written when it says the same); further ones are
// removed, and a group left without hooks goes with them; with none, a
// group of its own is appended. emptied reports that the event was
// removed: its groups were ours alone.
func setEventHook(d *jsonedit.Doc, event string, matcher bool, want json.RawMessage) (emptied bool, err error) {
	groups := d.Get("hooks", event)
	if groups != nil && groups.Kind != jsonedit.Array {
		return false, fmt.Errorf("its hooks.%s is not a JSON array", event)
	}
	var ours []hookSpot
	if groups != nil {
		for gi := range groups.Elements {
			hooks := d.Get("hooks", event, gi, "hooks")
			if hooks == nil || hooks.Kind != jsonedit.Array {
				continue // not a matcher group: not ours to judge
			}
			for hi, h := range hooks.Elements {
				if isOurHook(h.Raw) {
					ours = append(ours, hookSpot{gi, hi})
				}
			}
		}
	}
	if want != nil && len(ours) > 0 {
		first := ours[0]
		ours = ours[1:]
		if !sameJSON(d.Get("hooks", event, first.group, "hooks", first.hook).Raw, want) {
			if err := d.Set(want, "hooks", event, first.group, "hooks", first.hook); err != nil {
				return false, err
			}
		}
		want = nil // placed
	}
	for i := len(ours) - 1; i >= 0; i-- { // the last first: the places before stay where they are
		at := []any{"hooks", event, ours[i].group}
		if len(d.Get(append(at, "hooks")...).Elements) > 1 {
			at = append(at, "hooks", ours[i].hook)
		}
		if err := d.Delete(at...); err != nil {
			return false, err
		}
	}
	if want != nil {
		group := claudeHookGroup{Hooks: []json.RawMessage{want}}
		if matcher {
			group.Matcher = "*"
		}
		g, _ := json.Marshal(&group)
		if groups == nil {
			return false, d.Set(append(append([]byte("["), g...), ']'), "hooks", event)
		}
		return false, d.Append(g, "hooks", event)
	}
	if len(ours) > 0 && len(d.Get("hooks", event).Elements) == 0 {
		return true, d.Delete("hooks", event)
	}
	return false, nil
}

// claudeHookGroup is a matcher group of settings.json's hooks.<event>.
type claudeHookGroup struct {
	Matcher string            `json:"matcher,omitempty"`
	Hooks   []json.RawMessage `json:"hooks"`
}

// printDiff prints the line diff of before and after (unified, three
// lines of context).
func printDiff(w io.Writer, name string, before, after []byte) {
	a, b := splitLines(before), splitLines(after)
	fmt.Fprintf(w, "--- %s\n+++ %s\n", name, name)
	for _, h := range diffHunks(a, b, 3) {
		fmt.Fprint(w, h)
	}
}

func splitLines(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
