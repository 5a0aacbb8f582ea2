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
	{"Notification", false}, {"Stop", false}, {"SubagentStop", false},
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
// removed when receiver is "". Every other key, hook and matcher group is
// kept as written (values unchanged but for whitespace); changed is false
// when doc already says what was asked, and then out is nil.
func setClaudeHooks(doc []byte, receiver string) (out []byte, changed bool, err error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		doc = []byte("{}")
	}
	if !json.Valid(doc) {
		return nil, false, errors.New("the file is not valid JSON (fix it or move it aside)")
	}
	top, err := objectMembers(doc)
	if err != nil {
		return nil, false, fmt.Errorf("the file is not a JSON object: %v", err)
	}
	hi := -1
	var events []member
	for i, m := range top {
		if m.key == "hooks" {
			hi = i
			if string(bytes.TrimSpace(m.value)) == "null" { // none
				continue
			}
			if events, err = objectMembers(m.value); err != nil {
				return nil, false, errors.New("its hooks is not a JSON object")
			}
		}
	}
	for _, ev := range claudeHookEvents {
		var want json.RawMessage
		if receiver != "" {
			want, _ = json.Marshal(&claudeHook{Type: "command", Command: receiver + " " + ev.name, Timeout: hookTimeout})
		}
		if events, err = setEventHook(events, ev.name, ev.matcher, want); err != nil {
			return nil, false, err
		}
	}
	switch {
	case hi >= 0 && len(events) == 0 && receiver == "":
		top = append(top[:hi], top[hi+1:]...)
	case hi >= 0:
		top[hi].value = joinMembers(events)
	case len(events) > 0:
		top = append(top, member{key: "hooks", value: joinMembers(events)})
	}
	var b bytes.Buffer
	if err := json.Indent(&b, joinMembers(top), "", "  "); err != nil {
		return nil, false, err
	}
	b.WriteByte('\n')
	if sameJSON(doc, b.Bytes()) {
		return nil, false, nil
	}
	return b.Bytes(), true, nil
}

// setEventHook makes the matcher groups of one event hold exactly one
// claudemesh receiver, want (nil: none). An existing one is replaced where
// it is; further ones are removed, and a group left empty goes with them;
// with none, a group of its own is appended.
func setEventHook(events []member, event string, matcher bool, want json.RawMessage) ([]member, error) {
	ei := -1
	var groups []json.RawMessage
	for i, m := range events {
		if m.key == event {
			ei = i
			var err error
			if groups, err = arrayElements(m.value); err != nil {
				return nil, fmt.Errorf("its hooks.%s is not a JSON array", event)
			}
		}
	}
	placed := false
	var kept []json.RawMessage
	for _, g := range groups {
		members, err := objectMembers(g)
		if err != nil {
			kept = append(kept, g) // not a matcher group: not ours to judge
			continue
		}
		hi := -1
		var hooks []json.RawMessage
		for i, m := range members {
			if m.key == "hooks" {
				hi = i
				hooks, _ = arrayElements(m.value)
			}
		}
		touched := false
		var rest []json.RawMessage
		for _, h := range hooks {
			if !isOurHook(h) {
				rest = append(rest, h)
				continue
			}
			touched = true
			if want != nil && !placed {
				rest, placed = append(rest, want), true
			}
		}
		switch {
		case !touched:
			kept = append(kept, g)
		case len(rest) > 0:
			members[hi].value = joinArray(rest)
			kept = append(kept, joinMembers(members))
		}
	}
	if want != nil && !placed {
		group := []member{{key: "hooks", value: joinArray([]json.RawMessage{want})}}
		if matcher {
			group = append([]member{{key: "matcher", value: json.RawMessage(`"*"`)}}, group...)
		}
		kept = append(kept, joinMembers(group))
	}
	switch {
	case ei >= 0 && len(kept) == 0:
		return append(events[:ei], events[ei+1:]...), nil
	case ei >= 0:
		events[ei].value = joinArray(kept)
	case len(kept) > 0:
		events = append(events, member{key: event, value: joinArray(kept)})
	}
	return events, nil
}

// arrayElements splits a JSON array into its elements, each as written.
func arrayElements(doc []byte) ([]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, errors.New("not a JSON array")
	}
	var out []json.RawMessage
	for dec.More() {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return out, nil
}

// joinArray writes elements as a compact JSON array.
func joinArray(elems []json.RawMessage) json.RawMessage {
	b := []byte{'['}
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	return append(b, ']')
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
