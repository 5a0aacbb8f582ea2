package daemon_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/actors/daemon"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// TestSessionKeysSwept: the key file of a session that ended is kept while
// the session may come back for what was queued to its key (registered
// again within config.SessionKeyRetention, it speaks with the same key),
// and removed once it went unused that long — by the daily sweep and by
// the sweep at the start; a registered session's key is never removed,
// however old its file. Nothing is removed before the sweeps have run for
// the retention (until then a file's time is its creation, not its
// session's end).
func TestSessionKeysSwept(t *testing.T) {
	paths := tempPaths(t)
	start := func(sweep time.Duration) *daemon.Daemon {
		cfg := config.DefaultFile()
		cfg.IPC.TCPEnabled = false
		d, err := daemon.Start(daemon.Options{Paths: paths, Config: cfg, Version: "test", KeySweepInterval: sweep,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	long := time.Now().Add(-config.SessionKeyRetention - time.Hour)
	age := func(path string) {
		t.Helper()
		if err := os.Chtimes(path, long, long); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(path string) bool {
		_, err := os.Stat(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		return err == nil
	}
	ctx := context.Background()

	d := start(20 * time.Millisecond)
	c := ipc.NewClient(paths.Socket())
	register(t, c, "sess-live", "live", os.Getpid())
	endedTok, ended := register(t, c, "sess-ended", "ended", os.Getpid())
	age(paths.SessionKeyFile("local", "sess-ended")) // created long ago, ended now
	if _, err := c.DeregisterSession(ctx, endedTok); err != nil {
		t.Fatal(err)
	}
	stale := []string{paths.SessionKeyFile("local", "sess-gone"), paths.SessionKeyFile("left-mesh", "sess-gone")}
	for _, f := range stale {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		age(f)
	}
	age(paths.SessionKeyFile("local", "sess-live"))
	age(paths.SessionKeysSweptSince()) // as if the sweeps had begun long ago
	wait.For(t, settleWithin, "the daily sweep to remove the keys unused for the retention", func() bool {
		return !exists(stale[0]) && !exists(stale[1])
	})
	for _, kept := range []string{"sess-live", "sess-ended"} {
		if !exists(paths.SessionKeyFile("local", kept)) {
			t.Errorf("the key of %s was removed", kept)
		}
	}
	tok, again := register(t, c, "sess-ended", "ended", os.Getpid())
	if again.SessionPubkey != ended.SessionPubkey {
		t.Errorf("sess-ended registered again within the retention: key %s, want its own %s", again.SessionPubkey, ended.SessionPubkey)
	}
	if _, err := c.DeregisterSession(ctx, tok); err != nil {
		t.Fatal(err)
	}
	d.Close()

	// At the start: sess-ended's key went unused for the retention while
	// the daemon was down.
	age(paths.SessionKeyFile("local", "sess-ended"))
	d = start(time.Hour)
	defer d.Close()
	if exists(paths.SessionKeyFile("local", "sess-ended")) {
		t.Error("the key of a session unused for the retention is still there after the start")
	}
	if !exists(paths.SessionKeyFile("local", "sess-live")) {
		t.Error("the key of a registered session was removed at the start")
	}
	_, fresh := register(t, c, "sess-ended", "ended", os.Getpid())
	if fresh.SessionPubkey == ended.SessionPubkey {
		t.Error("sess-ended registered again after the retention kept its old key")
	}
}
