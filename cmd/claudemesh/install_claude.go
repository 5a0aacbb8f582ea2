package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"

	"github.com/claudemesh/claudemesh-go/cmd/claudemesh/internal/jsonedit"
	"github.com/claudemesh/claudemesh-go/cmd/internal/mcpserver"
	"github.com/claudemesh/claudemesh-go/config"
)

type installCmd struct {
	ClaudeCode installClaudeCodeCmd `cmd:"" name:"claude-code" help:"Register claudemesh as an MCP server in Claude Code's user configuration (~/.claude.json, mcpServers.claudemesh) and its hook receiver in Claude Code's hooks (~/.claude/settings.json)."`
}

type uninstallCmd struct {
	ClaudeCode uninstallClaudeCodeCmd `cmd:"" name:"claude-code" help:"Remove the claudemesh MCP server and hooks from Claude Code's configuration."`
}

type installClaudeCodeCmd struct {
	DryRun bool   `name:"dry-run" help:"Print the change and write nothing."`
	Tools  string `enum:"claudemesh,agent-mail" default:"claudemesh" help:"The tools the MCP server serves: claudemesh's own, or agent-mail (MCP Agent Mail's tool names and arguments, for agents prompted for it)."`
}

type uninstallClaudeCodeCmd struct {
	DryRun bool `name:"dry-run" help:"Print the change and write nothing."`
}

// claudeServer is a stdio server entry of Claude Code's mcpServers, in
// the order Claude Code writes its fields.
type claudeServer struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

// claudeServerName is the key of our entry in Claude Code's mcpServers.
const claudeServerName = "claudemesh"

// leanMCP is the MCP server's own binary (cmd/claudemesh-mcp), which
// starts in less than half of claudemesh's time.
const leanMCP = "claudemesh-mcp"

// Run registers the MCP server and installs the hooks, both edits worked
// out before either is written: a file that cannot be edited leaves
// neither half done.
func (c *installClaudeCodeCmd) Run() error {
	exe, err := installedBinary() // hook_install.go
	if err != nil {
		return err
	}
	// No GODEBUG for the runtime's monitor (cmd/internal/sysmon): the
	// server sets it by re-executing itself, and a diagnostic setting has
	// no place in the user's configuration.
	server := claudeServer{Type: "stdio", Command: exe, Args: []string{"mcp"}, Env: map[string]string{}}
	if lean := sibling(exe, leanMCP); lean != "" {
		server.Command, server.Args = lean, []string{}
	}
	set, err := mcpserver.ParseToolSet(c.Tools)
	if err != nil {
		return err
	}
	if set != mcpserver.ToolsClaudemesh {
		server.Args = append(server.Args, "--tools", string(set))
	}
	entry, err := json.Marshal(&server)
	if err != nil {
		return err
	}
	cfg, err := planClaudeConfig(entry)
	if err != nil {
		return err
	}
	hooks, err := planClaudeHooks(exe) // hook_install.go
	if err != nil {
		return err
	}
	if err := cfg.apply(c.DryRun); err != nil {
		return err
	}
	return hooks.apply(c.DryRun)
}

// Run unregisters and uninstalls them, planned as install's are.
func (c *uninstallClaudeCodeCmd) Run() error {
	cfg, err := planClaudeConfig(nil)
	if err != nil {
		return err
	}
	hooks, err := planClaudeHooks("")
	if err != nil {
		return err
	}
	return errors.Join(cfg.apply(c.DryRun), hooks.apply(c.DryRun))
}

// claudeConfigPath is Claude Code's user configuration file:
// $CLAUDE_CONFIG_DIR/.claude.json when that is set, else ~/.claude.json.
func claudeConfigPath() (string, error) {
	if dir := os.Getenv("CLAUDE_CONFIG_DIR"); dir != "" {
		return filepath.Join(dir, ".claude.json"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot find Claude Code's configuration: %w", err)
	}
	return filepath.Join(home, ".claude.json"), nil
}

// configEdit is the edit of Claude Code's user configuration that sets
// mcpServers.claudemesh to entry (nil: removes it), keeping everything else
// as it is, worked out before anything is written.
type configEdit struct {
	path          string
	out           []byte
	before, entry json.RawMessage
	exists        bool
	changed       bool
}

// planClaudeConfig reads Claude Code's user configuration and works out the
// edit; a file it cannot edit is an error, and nothing is written.
func planClaudeConfig(entry json.RawMessage) (*configEdit, error) {
	path, err := claudeConfigPath()
	if err != nil {
		return nil, err
	}
	e := &configEdit{entry: entry}
	var doc []byte
	if e.path, doc, e.exists, err = readEdited(path); err != nil {
		return nil, err
	}
	if e.out, e.before, e.changed, err = setMCPServer(doc, claudeServerName, entry); err != nil {
		return nil, fmt.Errorf("%s: %w; nothing was changed", e.path, err)
	}
	return e, nil
}

// apply writes the edit and says what it did (or, dry, what it would do).
func (e *configEdit) apply(dry bool) error {
	verb := map[bool]string{true: "install", false: "uninstall"}[e.entry != nil]
	if !e.changed {
		if e.entry != nil {
			fmt.Printf("already installed: %s has mcpServers.%s = %s\n", e.path, claudeServerName, e.before)
		} else {
			fmt.Printf("not installed: %s has no mcpServers.%s\n", e.path, claudeServerName)
		}
		return nil
	}
	if dry {
		fmt.Printf("would %s in %s:\n", verb, e.path)
		printEntryChange(os.Stdout, e.before, e.entry)
		return nil
	}
	if err := writeEdited(e.path, e.out, e.exists); err != nil {
		return err
	}
	fmt.Printf("%sed in %s:\n", verb, e.path)
	printEntryChange(os.Stdout, e.before, e.entry)
	if e.entry != nil {
		fmt.Println("Restart Claude Code (or run /mcp) to load it.")
	}
	return nil
}

// printEntryChange prints the before and after of mcpServers.claudemesh.
func printEntryChange(w io.Writer, before, after json.RawMessage) {
	show := func(v json.RawMessage) string {
		if v == nil {
			return "(absent)"
		}
		var b bytes.Buffer
		if json.Compact(&b, v) != nil {
			return string(v)
		}
		return b.String()
	}
	fmt.Fprintf(w, "- mcpServers.%s: %s\n+ mcpServers.%s: %s\n", claudeServerName, show(before), claudeServerName, show(after))
}

// setMCPServer sets mcpServers[name] to entry (nil: removes it) in the
// JSON document doc (empty: an empty object) and returns the new
// document, edited in place: every other byte stays as it was, and the
// entry is laid out as its neighbours are (jsonedit), so that removing
// it gives back the bytes there were. before is the entry that was there
// (nil: none); changed is false when the document already says what was
// asked.
func setMCPServer(doc []byte, name string, entry json.RawMessage) (out []byte, before json.RawMessage, changed bool, err error) {
	d, err := editableObject(doc)
	if err != nil {
		return nil, nil, false, err
	}
	servers := d.Get("mcpServers")
	if servers != nil && servers.Kind != jsonedit.Object {
		return nil, nil, false, errors.New("its mcpServers is not a JSON object")
	}
	if cur := d.Get("mcpServers", name); cur != nil {
		before = cur.Raw
	}
	switch {
	case entry == nil && before == nil:
		return nil, nil, false, nil
	case entry != nil && before != nil && sameJSON(before, entry):
		return nil, before, false, nil
	case entry == nil:
		err = d.Delete("mcpServers", name)
	case servers == nil:
		if err = d.Set([]byte("{}"), "mcpServers"); err == nil {
			err = d.Set(entry, "mcpServers", name)
		}
	default:
		err = d.Set(entry, "mcpServers", name)
	}
	if err != nil {
		return nil, nil, false, err
	}
	return d.Bytes(), before, true, nil
}

// editableObject reads a configuration file an install edits (empty: an
// empty object), which must be one JSON object.
func editableObject(doc []byte) (*jsonedit.Doc, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		doc = []byte("{}\n")
	}
	d, err := jsonedit.Parse(doc)
	if err != nil {
		return nil, errors.New("the file is not valid JSON (fix it or move it aside)")
	}
	if d.Root().Kind != jsonedit.Object {
		return nil, errors.New("the file is not a JSON object")
	}
	return d, nil
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// writeEdited replaces path with data (config.WriteFileAtomic), keeping
// path's mode (0600 for a new file).
func writeEdited(path string, data []byte, exists bool) error {
	mode := fs.FileMode(0o600)
	if exists {
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		mode = st.Mode().Perm()
	}
	if err := config.WriteFileAtomic(path, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// readEdited reads a JSON file an install edits: its path with symlinks
// resolved (a linked file, say in a dotfiles repository, is edited where
// it lives), its content, and whether it exists.
func readEdited(path string) (resolved string, doc []byte, exists bool, err error) {
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	doc, err = os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return path, nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	return path, doc, err == nil, nil
}
