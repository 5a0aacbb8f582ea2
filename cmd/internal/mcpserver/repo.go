package mcpserver

import (
	"context"

	"github.com/claudemesh/claudemesh-go/cmd/internal/gitrepo"
)

// RepoID names the git repository of dir for locks and reservations
// (gitrepo.ID, which the agent hook shares without linking this package).
func RepoID(dir string) (string, error) { return gitrepo.ID(context.Background(), dir) }
