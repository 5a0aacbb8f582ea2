package mcpserver

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// guard_install: the commit guard (`claudemesh guard install`: pre-commit
// and pre-push hooks that refuse a commit touching files another session
// reserved) installed in a repository, by running claudemesh, whose path
// the hooks call.
type (
	guardInstallIn struct {
		Dir     string `json:"dir,omitempty" jsonschema:"A directory of the git repository (default: the one you work in)."`
		Warn    bool   `json:"warn,omitempty" jsonschema:"Warn about files others reserved instead of refusing the commit."`
		Offline string `json:"offline,omitempty" jsonschema:"When the daemon cannot answer at commit time: allow (the default: warn and let the commit through) or refuse."`
	}
	guardOut struct {
		Hooks []string `json:"hooks" jsonschema:"The hook files written (or, uninstalling, removed)."`
		Said  []string `json:"said" jsonschema:"What claudemesh guard said, line by line."`
	}
)

// guardTimeout bounds one run of claudemesh guard.
const guardTimeout = 30 * time.Second

func (m *mcpServer) addGuardInstallTool() {
	addTool(m.tools, &mcp.Tool{Name: "guard_install", Title: "Install the commit guard",
		Description: "Install the commit guard in a git repository: pre-commit and pre-push hooks that refuse a commit or push " +
			"touching files another agent reserved exclusively (reserve_files), naming the holder. A hook already there still runs " +
			"first. Installing again rewrites the guard's hooks.",
		InputSchema: schemaOf[guardInstallIn](func(p map[string]*jsonschema.Schema) {
			p["dir"].MaxLength = jsonschema.Ptr(4096)
			p["offline"].Enum = []any{"allow", "refuse"}
		}),
	}, m.guardInstall)
}

func (m *mcpServer) guardInstall(ctx context.Context, _ *mcp.CallToolRequest, in guardInstallIn) (*mcp.CallToolResult, *guardOut, error) {
	args := []string{"install", "--offline=" + cmp.Or(in.Offline, "allow")}
	if in.Warn {
		args = append(args, "--warn")
	}
	out, err := m.runGuard(ctx, in.Dir, args...)
	if err != nil {
		return nil, nil, err
	}
	return textResult(strings.Join(out.Said, "\n")), out, nil
}

// runGuard runs `claudemesh guard <args> <dir>` (dir "": the server's
// working directory, which must be in a repository).
func (m *mcpServer) runGuard(ctx context.Context, dir string, args ...string) (*guardOut, error) {
	if dir == "" {
		if repoOnce() == "" {
			return nil, errNoRepo
		}
		dir = "."
	}
	exe := m.claudemesh
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("the claudemesh binary cannot be found (%v); ask the user to run `claudemesh guard %s`", err, args[0])
		}
	}
	cctx, cancel := context.WithTimeout(ctx, guardTimeout)
	defer cancel()
	said, err := exec.CommandContext(cctx, exe, append(append([]string{"guard"}, args...), "--", dir)...).CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(said)), "\n")
	if err != nil {
		return nil, fmt.Errorf("claudemesh guard %s failed: %s; nothing more was changed", args[0], clip(strings.Join(lines, "; ")))
	}
	out := &guardOut{Hooks: []string{}, Said: lines}
	for _, l := range lines {
		for _, verb := range []string{"installed ", "removed the guard from ", "removed "} {
			if path, ok := strings.CutPrefix(l, verb); ok {
				path, _, _ = strings.Cut(path, " (")
				path, _, _ = strings.Cut(path, "; ")
				out.Hooks = append(out.Hooks, path)
				break
			}
		}
	}
	return out, nil
}
