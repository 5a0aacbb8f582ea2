package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// TestSessionNamesKept: the names a session's connection was given are
// its own and outlive the daemon. After a restart with the mesh's broker
// unreachable, the session still sends to the peer and the topic it named
// before (202 queued, to the key and the id they had), while a name it
// never saw is refused with 503 and stores nothing; a session that ends
// forgets them: the same id registered again has none.
func TestSessionNamesKept(t *testing.T) {
	paths := tempPaths(t)
	d := startEmbedded(t, paths)
	ctx := context.Background()
	c := ipc.NewClient(paths.Socket())
	tokA, _ := register(t, c, "sess-a", "alpha", os.Getpid())
	tokB, beta := register(t, c, "sess-b", "beta", os.Getpid())
	a := c.AsSession(tokA)
	waitLinked(t, a, c.AsSession(tokB))
	topic, err := a.CreateTopic(ctx, &messages.TopicCreateRequest{Name: "builds"})
	if err != nil {
		t.Fatal(err)
	}
	send := func(s *ipc.Client, to, id string) error {
		t.Helper()
		body := "to " + to
		_, err := s.Send(ctx, &messages.SendRequest{To: to, Message: &body, ClientMessageID: id}, "")
		return err
	}
	for _, to := range []string{"beta", "#builds"} {
		if err := send(a, to, "before-"+to); err != nil {
			t.Fatalf("send to %s with the broker up: %v", to, err)
		}
	}
	d.Close()
	unreachableBroker(t, paths)

	d = startEmbedded(t, paths)
	defer d.Close()
	for _, to := range []string{"BETA", "#builds"} {
		if err := send(a, to, "after-"+to); err != nil {
			t.Fatalf("send to %s after a restart, the broker away: %v; want 202 from the names kept", to, err)
		}
	}
	for id, want := range map[string]string{"after-BETA": beta.SessionPubkey, "after-#builds": "#" + topic.Topic.ID} {
		if row, err := a.OutboxRow(ctx, "", id); err != nil || row.To != want {
			t.Fatalf("row %s: %+v, %v; want it sent to %s", id, row, err, want)
		}
	}
	for _, to := range []string{"gamma", "#nope"} {
		if err := send(a, to, "unseen"); !neverSeen(err) {
			t.Fatalf("send to %s, never seen, the broker away: %v; want 503 broker_unavailable, never seen", to, err)
		}
	}
	if row, err := a.OutboxRow(ctx, "", "unseen"); err != nil || row != nil {
		t.Fatalf("a refused send stored %+v (%v)", row, err)
	}
	if _, err := c.DeregisterSession(ctx, tokA); err != nil {
		t.Fatal(err)
	}
	tokA2, _ := register(t, c, "sess-a", "alpha", os.Getpid())
	if err := send(c.AsSession(tokA2), "beta", "again"); !neverSeen(err) {
		t.Fatalf("send to beta from the session registered again: %v; want 503 (an ended session's names are forgotten)", err)
	}
}

// neverSeen reports whether err is the refusal of a name never seen while
// the broker is away.
func neverSeen(err error) bool {
	var me *messages.Error
	return errors.As(err, &me) && me.Status == http.StatusServiceUnavailable && me.Code == messages.CodeBrokerUnavailable &&
		strings.Contains(me.Detail, "never seen")
}

// unreachableBroker points the local membership of config.json at a port
// nothing listens on: the daemon runs no embedded broker, and its
// connections (the sessions' too) never come up.
func unreachableBroker(t *testing.T, paths config.Paths) {
	t.Helper()
	raw, err := os.ReadFile(paths.ConfigFile())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	meshes, _ := doc["meshes"].([]any)
	if len(meshes) != 1 {
		t.Fatalf("config.json has %d meshes, want the local one", len(meshes))
	}
	meshes[0].(map[string]any)["brokerUrl"] = "ws://127.0.0.1:1/ws"
	if raw, err = json.Marshal(doc); err == nil {
		err = os.WriteFile(paths.ConfigFile(), raw, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
}
