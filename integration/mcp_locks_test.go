package integration

import (
	"strings"
	"testing"
)

// TestMCPLocks: lock tools through `claudemesh mcp` as two agent sessions
// driven by the SDK's client: alice claims a file of the repository both
// run in; bob is told alice holds it; when alice's session ends (its MCP
// server exits) the lock is released and bob, waiting, gets it under a
// greater fence token. Bad arguments are tool errors that lock nothing.
func TestMCPLocks(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	a := startMCP(t, e, "alice", mcpOptions{})
	b := startMCP(t, e, "bob", mcpOptions{lean: true})
	a.waitPeer("bob")

	type lockOut struct {
		Key        string `json:"key"`
		Repo       string `json:"repo"`
		Granted    bool   `json:"granted"`
		FenceToken int64  `json:"fence_token"`
		Holder     string `json:"holder"`
	}
	var got lockOut
	a.mustCall("lock_acquire", map[string]any{"key": "file:src/lib.rs"}, &got)
	if !got.Granted || got.FenceToken < 1 || !strings.HasPrefix(got.Repo, "git:") || got.Holder != "alice" {
		t.Fatalf("alice's lock_acquire: %+v", got)
	}
	var other lockOut
	res := b.mustCall("lock_acquire", map[string]any{"key": "file:src/lib.rs"}, &other)
	if other.Granted || other.Holder != "alice" || !strings.Contains(text(res), "alice holds file:src/lib.rs") {
		t.Fatalf("bob's lock_acquire: %+v, %q", other, text(res))
	}
	var mesh lockOut
	b.mustCall("lock_acquire", map[string]any{"key": "file:src/lib.rs", "mesh_wide": true}, &mesh)
	if !mesh.Granted || mesh.Repo != "" {
		t.Errorf("a mesh-wide lock of the same key: %+v", mesh)
	}
	var list struct {
		Locks []lockOut `json:"locks"`
	}
	b.mustCall("lock_list", map[string]any{}, &list)
	if len(list.Locks) != 1 || list.Locks[0].Holder != "alice" {
		t.Errorf("lock_list of the repository: %+v", list)
	}
	for _, args := range []map[string]any{{"key": ""}, {"key": "k", "wait_seconds": -1}, {"key": "k", "ttl_seconds": 7200}, {"wait_seconds": 1}} {
		if res := b.call("lock_acquire", args); !res.IsError {
			t.Errorf("lock_acquire(%v) is not a tool error: %q", args, text(res))
		}
	}
	b.mustCall("lock_list", map[string]any{"mesh_wide": true}, &list)
	if len(list.Locks) != 2 {
		t.Errorf("lock_list of the mesh after bad arguments: %+v", list)
	}

	a.close() // alice's session ends: the daemon releases her locks
	b.mustCall("lock_acquire", map[string]any{"key": "file:src/lib.rs", "wait_seconds": 20}, &got)
	if !got.Granted || got.Holder != "bob" || got.FenceToken <= other.FenceToken {
		t.Fatalf("bob's lock_acquire after alice left: %+v (alice's token %d)", got, other.FenceToken)
	}
	var rel struct {
		Released bool `json:"released"`
	}
	b.mustCall("lock_release", map[string]any{"key": "file:src/lib.rs"}, &rel)
	if !rel.Released {
		t.Errorf("lock_release: %+v", rel)
	}
}

// TestMCPLocksOutsideRepo: an agent whose session runs outside a git
// repository is told so when it claims a lock of "this repository", rather
// than silently given the mesh-wide lock of the key; with mesh_wide it gets
// that lock, and lock_list says it lists every lock of the mesh.
func TestMCPLocksOutsideRepo(t *testing.T) {
	t.Parallel()
	e := localAgentsEnv(t)
	startDaemon(t, e, "--no-tcp")
	a := startMCP(t, e, "alice", mcpOptions{lean: true, dir: t.TempDir()})
	if res := a.call("lock_acquire", map[string]any{"key": "x"}); !res.IsError || !strings.Contains(text(res), "mesh_wide") {
		t.Fatalf("lock_acquire outside a repository: %q", text(res))
	}
	if res := a.call("lock_release", map[string]any{"key": "x"}); !res.IsError || !strings.Contains(text(res), "mesh_wide") {
		t.Fatalf("lock_release outside a repository: %q", text(res))
	}
	var got struct {
		Granted bool   `json:"granted"`
		Repo    string `json:"repo"`
	}
	a.mustCall("lock_acquire", map[string]any{"key": "x", "mesh_wide": true}, &got)
	if !got.Granted || got.Repo != "" {
		t.Fatalf("a mesh-wide lock_acquire: %+v", got)
	}
	if res := a.mustCall("lock_list", map[string]any{}, nil); !strings.HasPrefix(text(res), "1 lock (this session is not in a git repository: every lock of the mesh):") {
		t.Fatalf("lock_list outside a repository: %q", text(res))
	}
}
