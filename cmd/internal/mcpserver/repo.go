package mcpserver

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// RepoID names the git repository of dir for locks: "git:" and the hash
// of its first root commit, the same in every clone, so that agents on
// different machines working on one repository share its locks while
// another repository's locks on the same paths never collide.
func RepoID(dir string) (string, error) {
	out, err := exec.Command("git", "-C", dir, "rev-list", "--max-parents=0", "HEAD").Output()
	roots := strings.Fields(string(out))
	if err != nil || len(roots) == 0 {
		return "", fmt.Errorf("%s is not inside a git repository with a commit", dir)
	}
	return "git:" + slices.Min(roots), nil
}
