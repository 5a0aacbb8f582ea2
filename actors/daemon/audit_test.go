package daemon_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// TestAuditLogOfADaemon: a daemon's sends are in its audit log, which
// verifies; the log covers every sender, so an agent session is refused
// it and told how to read it.
func TestAuditLogOfADaemon(t *testing.T) {
	paths := tempPaths(t)
	d := startEmbedded(t, paths)
	defer d.Close()
	c := ipc.NewClient(paths.Socket())
	ctx := context.Background()
	tok, _ := register(t, c, "sess-a", "alpha", os.Getpid())
	if _, err := c.AsSession(tok).Send(ctx, &messages.SendRequest{To: "*", Message: ptr("audited"), ClientMessageID: "au-1"}, ""); err != nil {
		t.Fatal(err)
	}
	var e *messages.Error
	if _, err := c.AsSession(tok).Audit(ctx, 0, 10); !errors.As(err, &e) || e.Status != 403 || e.Code != "session_scope" {
		t.Fatalf("a session's GET /v1/audit: %v, want 403 session_scope", err)
	}
	page, err := c.Audit(ctx, 0, 0)
	if err != nil || len(page.Entries) == 0 || page.Entries[0].Kind != "outbox.accepted" || page.Entries[0].Subject != "au-1" {
		t.Fatalf("GET /v1/audit: %+v %v", page, err)
	}
	if _, err := messages.VerifyAudit(nil, page.Entries); err != nil {
		t.Fatal(err)
	}
}
