package config

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestParentPID(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if got, err := ParentPID(os.Getpid()); err != nil || got != os.Getppid() {
		t.Fatalf("ParentPID(self) = %d, %v; want %d", got, err, os.Getppid())
	}
	if _, err := ParentPID(1 << 30); !os.IsNotExist(err) {
		t.Errorf("ParentPID of no process: %v, want ErrNotExist", err)
	}
}

// TestContinuedSession: of the sessions registered by the agent's process
// or by a child of it, the one registered last; none of another process.
func TestContinuedSession(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	me := os.Getpid()
	recs := []SessionRecord{
		{SessionID: "hook", PID: me, RegisteredAt: 10},
		{SessionID: "mcp", PID: child.Process.Pid, RegisteredAt: 20},
		{SessionID: "other", PID: os.Getppid(), RegisteredAt: 30},
	}
	if got, ok := ContinuedSession(recs, me); !ok || got.SessionID != "mcp" {
		t.Errorf("ContinuedSession = %+v %v, want the MCP server's, registered last", got, ok)
	}
	if got, ok := ContinuedSession(recs[:1], me); !ok || got.SessionID != "hook" {
		t.Errorf("ContinuedSession of the hook's alone = %+v %v", got, ok)
	}
	if got, ok := ContinuedSession(recs[2:], me); ok {
		t.Errorf("another process's session %+v was continued", got)
	}
	if _, ok := ContinuedSession(recs, 0); ok {
		t.Error("pid 0 continued a session")
	}
}

// TestReadSessionsLeavesCorruptFile: the agent hook's read changes
// nothing, where the daemon's LoadSessions moves a damaged file aside.
func TestReadSessionsLeavesCorruptFile(t *testing.T) {
	p := Paths{DaemonDir: t.TempDir()}
	if recs, err := p.ReadSessions(); recs != nil || err != nil {
		t.Fatalf("no file: %v %v", recs, err)
	}
	if err := os.WriteFile(p.SessionsFile(), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ReadSessions(); err == nil {
		t.Fatal("a damaged file read without an error")
	}
	if _, err := os.Stat(p.SessionsFile()); err != nil {
		t.Fatalf("ReadSessions moved the file: %v", err)
	}
	if _, err := p.LoadSessions(); err == nil {
		t.Fatal("LoadSessions: no error")
	}
	if aside, _ := filepath.Glob(p.SessionsFile() + ".corrupt-*"); len(aside) != 1 {
		t.Errorf("LoadSessions set aside %v", aside)
	}
}
