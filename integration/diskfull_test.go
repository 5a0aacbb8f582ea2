package integration

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// TestDiskFull: the daemon directory on a 6 MiB tmpfs, most of it taken by
// a filler file, then a storm of 16 KiB sends. When the disk fills, sends
// are answered 507 insufficient_storage; every send answered 202 is in the
// outbox and none answered otherwise is; reads keep answering; once the
// filler is deleted the daemon accepts sends again by itself. (The limits
// of config.toml are set out of the way: this is the disk itself running
// out.) Needs root for the mount.
func TestDiskFull(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(e.daemonDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=6m,mode=0700", "tmpfs", e.daemonDir).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount a tmpfs (CI runs as root): %v: %s", err, out)
		}
		t.Skipf("cannot mount a tmpfs here (not root?): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", e.daemonDir).Run() })
	if err := os.WriteFile(filepath.Join(e.daemonDir, "config.toml"),
		[]byte("[outbox]\nmax_size_mb = 1000000\n[disk]\nreserved_mb = 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, e, "--no-tcp")
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	filler := filepath.Join(e.daemonDir, "filler")
	if err := os.WriteFile(filler, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}

	body := strings.Repeat("x", 16<<10)
	accepted := map[string]bool{}
	refused := map[string]bool{}
	for i := 0; i < 400 && len(refused) < 5; i++ {
		id := fmt.Sprintf("full-%d", i)
		st, raw, err := trySend(c, "@fill", body, id)
		switch {
		case err != nil:
			t.Fatalf("send %s: %v", id, err)
		case st == http.StatusAccepted:
			accepted[id] = true
		case st == http.StatusInsufficientStorage && strings.Contains(string(raw), `"insufficient_storage"`):
			refused[id] = true
		default:
			t.Fatalf("send %s: %d %s", id, st, raw)
		}
	}
	if len(accepted) == 0 || len(refused) == 0 {
		t.Fatalf("%d accepted, %d refused: the disk never filled (or never took a send)", len(accepted), len(refused))
	}
	if st, _, err := getJSON(c, "http://localhost/v1/health", nil); err != nil || st != http.StatusOK {
		t.Fatalf("GET /v1/health on a full disk: %d %v", st, err)
	}
	rows := byClientID(listAll(t, c, ""))
	for id := range accepted {
		if _, ok := rows[id]; !ok {
			t.Errorf("%s was answered 202 and is not in the outbox", id)
		}
	}
	for id := range refused {
		if _, ok := rows[id]; ok {
			t.Errorf("%s was refused and is in the outbox", id)
		}
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	var st int
	wait.For(t, e2eDeliverDeadline, "a send to be accepted once there is space", func() bool {
		st, _, _ = trySend(c, "@fill", "small", "after-space")
		return st == http.StatusAccepted
	})
	if d.exited() {
		t.Fatalf("the daemon exited: %v\n%s", d.waitErr, d.stderr)
	}
	t.Logf("checked: %d sends accepted and all stored, %d refused 507 and none stored, reads answered, sends accepted again after space returned",
		len(accepted), len(refused))
}
