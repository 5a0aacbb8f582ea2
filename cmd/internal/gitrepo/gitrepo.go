// Package gitrepo names a git repository as the mesh's locks and file
// reservations do: the MCP server, the CLI's lock, reserve and guard
// commands, and the agent hook's SessionStart context agree on it. It
// links nothing of claudemesh, so that the hook receiver can use it.
package gitrepo

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// ID names the git repository of dir: "git:" and the hash of its first
// root commit, the same in every clone, so that agents on different
// machines working on one repository share its locks while another
// repository's locks on the same paths never collide. git is stopped when
// ctx ends.
func ID(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-list", "--max-parents=0", "HEAD").Output()
	roots := strings.Fields(string(out))
	if err != nil || len(roots) == 0 {
		return "", fmt.Errorf("%s is not inside a git repository with a commit", dir)
	}
	return "git:" + slices.Min(roots), nil
}
