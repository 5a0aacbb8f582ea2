package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/cmd/internal/gitrepo"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// The lock tools: fenced locks the mesh's broker holds, taken as the
// session, so that the daemon renews them while the session lives and
// releases them when it ends. A lock's repository is by default the git
// repository the server runs in (agents on other machines in clones of it
// share its locks); mesh_wide takes one for the whole mesh.
type (
	lockAcquireIn struct {
		Key         string `json:"key" jsonschema:"What to lock, e.g. file:src/lib.rs for a file (its path from the repository's root), or any name agents agree on, such as release-branch."`
		WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"How long to wait if another agent holds it (0: answer at once; at most 600)."`
		TTLSeconds  int    `json:"ttl_seconds,omitempty" jsonschema:"How long the lock outlives this session if it dies without releasing it (default 30)."`
		MeshWide    bool   `json:"mesh_wide,omitempty" jsonschema:"Lock the key for the whole mesh instead of this repository."`
	}
	lockReleaseIn struct {
		Key      string `json:"key" jsonschema:"The key lock_acquire took."`
		MeshWide bool   `json:"mesh_wide,omitempty" jsonschema:"The key was taken with mesh_wide."`
	}
	lockListIn struct {
		MeshWide bool `json:"mesh_wide,omitempty" jsonschema:"List the locks of every repository and the mesh-wide ones, not only this repository's."`
	}
	lockOut struct {
		Key        string `json:"key" jsonschema:"The lock's key."`
		Repo       string `json:"repo,omitempty" jsonschema:"The repository it belongs to (empty: mesh-wide)."`
		Granted    bool   `json:"granted" jsonschema:"Whether you hold it now."`
		FenceToken int64  `json:"fence_token" jsonschema:"The fence token: it grows with every new holder; pass it to whatever checks writes, so a stale holder is refused."`
		Holder     string `json:"holder" jsonschema:"Who holds it (display name)."`
		ExpiresAt  string `json:"expires_at" jsonschema:"When it runs out unless renewed (the daemon renews yours)."`
	}
	lockReleaseOut struct {
		Key      string `json:"key" jsonschema:"The key."`
		Released bool   `json:"released" jsonschema:"False when you did not hold it."`
	}
	lockListOut struct {
		Locks []lockOut `json:"locks" jsonschema:"The held locks, by repository and key."`
	}
)

// repoOnce resolves the server's repository once: "" outside one.
var repoOnce = sync.OnceValue(func() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	id, _ := gitrepo.ID(context.Background(), dir)
	return id
})

func (m *mcpServer) addLockTools() {
	addTool(m.tools, &mcp.Tool{Name: "lock_acquire", Title: "Claim a lock",
		Description: "Claim a lock before editing something other agents of the mesh (on this machine or others) may edit at the same time, " +
			"e.g. key file:src/lib.rs before changing that file. One agent holds a lock at a time; you keep it while this session " +
			"lives, until lock_release. If another agent holds it you are told who and until when: wait (wait_seconds), or work on " +
			"something else. The answer's fence token grows with every new holder.",
		InputSchema: schemaOf[lockAcquireIn](func(p map[string]*jsonschema.Schema) {
			p["key"].MinLength, p["key"].MaxLength = jsonschema.Ptr(1), jsonschema.Ptr(messages.MaxLockKey)
			p["wait_seconds"].Minimum, p["wait_seconds"].Maximum = jsonschema.Ptr(0.0), jsonschema.Ptr(messages.MaxLockWait.Seconds())
			p["ttl_seconds"].Minimum, p["ttl_seconds"].Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(messages.MaxLockTTL.Seconds())
		})}, m.lockAcquire)
	addTool(m.tools, &mcp.Tool{Name: "lock_release", Title: "Release a lock",
		Description: "Release a lock you took with lock_acquire, as soon as you are done with what it guards, so that others may take it.",
		InputSchema: schemaOf[lockReleaseIn](func(p map[string]*jsonschema.Schema) {
			p["key"].MinLength, p["key"].MaxLength = jsonschema.Ptr(1), jsonschema.Ptr(messages.MaxLockKey)
		})}, m.lockRelease)
	addTool(m.tools, &mcp.Tool{Name: "lock_list", Title: "List locks",
		Description: "List the locks held in this repository (or, with mesh_wide, in the whole mesh): what, by whom, until when.",
		InputSchema: schemaOf[lockListIn](nil)}, m.lockList)
}

// errNoLockRepo refuses a lock of "this repository" where the server runs
// outside one: the key would silently be the mesh's.
var errNoLockRepo = errors.New("invalid argument: this session's directory is not inside a git repository with a commit, so the " +
	"lock cannot be this repository's; nothing was locked or released: call again with mesh_wide true for a lock of the whole mesh")

// lockRepo is the repository of a lock tool's call ("": mesh-wide), or
// errNoLockRepo.
func lockRepo(meshWide bool) (string, error) {
	if meshWide {
		return "", nil
	}
	if repo := repoOnce(); repo != "" {
		return repo, nil
	}
	return "", errNoLockRepo
}

// lockError is the sentence for a failed lock request.
func (m *mcpServer) lockError(s *Session, err error) error {
	var me *messages.Error
	if errors.As(err, &me) && me.Status == 400 {
		return fmt.Errorf("invalid argument: %s; nothing was locked or released: fix it and call again", agentDetail(s, me.Detail))
	}
	return m.toolError(s, err)
}

func lockOf(l messages.LockInfo, granted bool) lockOut {
	return lockOut{Key: l.Key, Repo: l.Repo, Granted: granted, FenceToken: l.FenceToken, Holder: l.HolderName, ExpiresAt: l.ExpiresAt}
}

func (m *mcpServer) lockAcquire(ctx context.Context, _ *mcp.CallToolRequest, in lockAcquireIn) (*mcp.CallToolResult, *lockOut, error) {
	repo, err := lockRepo(in.MeshWide)
	if err != nil {
		return nil, nil, err
	}
	req := &messages.LockAcquireRequest{Key: in.Key, Repo: repo, TTLMs: int64(in.TTLSeconds) * 1000,
		WaitMs: int64(in.WaitSeconds) * 1000}
	if err := req.Validate(); err != nil {
		return nil, nil, m.lockError(nil, err)
	}
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	res, err := ipc.WhenLinked(ctx, func() (*messages.LockAcquired, error) { return s.as().AcquireLock(ctx, req) })
	if err != nil {
		return nil, nil, m.lockError(s, err)
	}
	out := lockOf(res.Lock.LockInfo, res.Granted)
	if !res.Granted {
		return textResult(fmt.Sprintf("Not granted: %s holds %s until %s. Wait for it (call again with wait_seconds), or work on something else.",
			out.Holder, out.Key, out.ExpiresAt)), &out, nil
	}
	return textResult(fmt.Sprintf("You hold %s (fence token %d) while this session lives; call lock_release when done.", out.Key,
		out.FenceToken)), &out, nil
}

func (m *mcpServer) lockRelease(ctx context.Context, _ *mcp.CallToolRequest, in lockReleaseIn) (*mcp.CallToolResult, *lockReleaseOut, error) {
	repo, err := lockRepo(in.MeshWide)
	if err != nil {
		return nil, nil, err
	}
	req := &messages.LockReleaseRequest{Key: in.Key, Repo: repo}
	if err := req.Validate(); err != nil {
		return nil, nil, m.lockError(nil, err)
	}
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	res, err := ipc.WhenLinked(ctx, func() (*messages.LockReleaseDone, error) { return s.as().ReleaseLock(ctx, req) })
	if err != nil {
		return nil, nil, m.lockError(s, err)
	}
	out := &lockReleaseOut{Key: res.Key, Released: res.Released}
	if !res.Released {
		return textResult(fmt.Sprintf("You did not hold %s: nothing released.", res.Key)), out, nil
	}
	return textResult(fmt.Sprintf("Released %s.", res.Key)), out, nil
}

func (m *mcpServer) lockList(ctx context.Context, _ *mcp.CallToolRequest, in lockListIn) (*mcp.CallToolResult, *lockListOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	repo, err := lockRepo(in.MeshWide)
	everyRepo := ""
	if err != nil { // outside a repository: every lock of the mesh, said so
		everyRepo = " (this session is not in a git repository: every lock of the mesh)"
	}
	res, err := ipc.WhenLinked(ctx, func() (*messages.LockList, error) { return s.as().Locks(ctx, "", repo) })
	if err != nil {
		return nil, nil, m.lockError(s, err)
	}
	out := &lockListOut{Locks: make([]lockOut, len(res.Locks))}
	if len(res.Locks) == 0 {
		return textResult("No locks are held" + everyRepo + "."), out, nil
	}
	var text strings.Builder
	fmt.Fprintf(&text, "%d %s%s:", len(res.Locks), plural(len(res.Locks), "lock", "locks"), everyRepo)
	for i, l := range res.Locks {
		out.Locks[i] = lockOf(l, false)
		left := "expired"
		if t, err := time.Parse(time.RFC3339Nano, l.ExpiresAt); err == nil && time.Until(t) > 0 {
			left = time.Until(t).Round(time.Second).String() + " left"
		}
		fmt.Fprintf(&text, "\n%s held by %s (fence token %d, %s)", l.Key, l.HolderName, l.FenceToken, left)
	}
	return textResult(text.String()), out, nil
}
