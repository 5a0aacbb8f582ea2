package coldpath

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	brokeractors "github.com/claudemesh/claudemesh-go/actors/broker"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
	"github.com/claudemesh/claudemesh-go/persistence/ratelimit"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// startBroker runs our broker on SQLite in a temp directory, serving one
// mesh with the members named, and returns their memberships.
func startBroker(t *testing.T, names ...string) map[string]*config.Membership {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := broker.Open(ctx, broker.Options{Dir: t.TempDir(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	mesh, err := store.CreateMesh(ctx, broker.Mesh{Slug: "cold"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := brokeractors.Start(brokeractors.Options{Store: store, Log: log,
		Limiter: ratelimit.NewMemory(ratelimit.Options{Limit: 1000, Window: time.Minute})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b.Close(ctx)
		srv.Close()
	})
	out := map[string]*config.Membership{}
	for _, name := range names {
		id, err := meshcrypto.GenerateIdentity()
		if err != nil {
			t.Fatal(err)
		}
		member, err := store.AddMember(ctx, mesh.ID, "member-"+name, id.PublicKeyHex(), name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = &config.Membership{Slug: "cold", MeshID: mesh.ID, MemberID: member.ID, Pubkey: id.PublicKeyHex(),
			SecretKey: id.SecretKeyHex(), Name: name, BrokerURL: "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"}
	}
	return out
}

func dial(t *testing.T, m *config.Membership) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Dial(ctx, m, Options{SessionID: "test-" + m.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func validated(t *testing.T, to, body, cid string) *messages.Send {
	t.Helper()
	send, err := (&messages.SendRequest{To: to, Message: &body, ClientMessageID: cid}).Validate()
	if err != nil {
		t.Fatal(err)
	}
	return send
}

// TestSendAndRetry: a cold send is acked 201 with the broker's id; the same
// request again is 200 with the first id; the id with another request is
// 409 — the broker's dedupe is what makes a retry after a lost ack safe.
func TestSendAndRetry(t *testing.T) {
	ms := startBroker(t, "alice", "bob")
	alice := dial(t, ms["alice"])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	cid, ack, err := alice.Send(ctx, validated(t, ms["bob"].Pubkey, "hello", ""))
	if err != nil || ack.Code != 201 || ack.BrokerMessageID == "" || cid == "" {
		t.Fatalf("first send: %s %+v %v", cid, ack, err)
	}
	first := ack.BrokerMessageID
	if _, ack, err = alice.Send(ctx, validated(t, ms["bob"].Pubkey, "hello", cid)); err != nil || ack.Code != 200 || ack.BrokerMessageID != first {
		t.Fatalf("same request again: %+v %v; want 200 with %s", ack, err, first)
	}
	if _, ack, err = alice.Send(ctx, validated(t, ms["bob"].Pubkey, "changed", cid)); err != nil || ack.Code != 409 {
		t.Fatalf("same id, other request: %+v %v; want 409", ack, err)
	}
	if _, ack, err = alice.Send(ctx, validated(t, "*", "to all", "")); err != nil || ack.Code != 201 {
		t.Fatalf("broadcast: %+v %v", ack, err)
	}
}

// TestPeers: a session sees the mesh's connected peers, and a display name
// resolves to the key a DM goes to.
func TestPeers(t *testing.T) {
	ms := startBroker(t, "alice", "bob")
	dial(t, ms["bob"])
	alice := dial(t, ms["alice"])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	peers, err := alice.Peers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := messages.ResolvePeer("Bob", "cold", peers); err != nil || got != ms["bob"].Pubkey {
		t.Fatalf("ResolvePeer(Bob) over %+v = %q, %v; want bob's key", peers, got, err)
	}
}

// TestDialRefusals: a bad secret key is ErrIdentity; a key the broker does
// not know is refused at hello; the embedded broker's mesh needs the daemon.
func TestDialRefusals(t *testing.T) {
	ms := startBroker(t, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	bad := *ms["alice"]
	bad.SecretKey = "not hex"
	if _, err := Dial(ctx, &bad, Options{SessionID: "test"}); !errors.Is(err, ErrIdentity) {
		t.Errorf("bad secret key: %v, want ErrIdentity", err)
	}
	other, err := meshcrypto.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	stranger := *ms["alice"]
	stranger.SecretKey, stranger.Pubkey = other.SecretKeyHex(), other.PublicKeyHex()
	if _, err := Dial(ctx, &stranger, Options{SessionID: "test"}); err == nil || !strings.Contains(err.Error(), "cannot reach the broker") {
		t.Errorf("unknown key: %v, want a refused hello", err)
	}
	local := *ms["alice"]
	local.BrokerURL = ""
	if _, err := Dial(ctx, &local, Options{SessionID: "test"}); err == nil || !strings.Contains(err.Error(), "needs the daemon") {
		t.Errorf("embedded mesh: %v", err)
	}
}

// TestSendWithoutAck: when the wait for the ack ends first, the error says
// the outcome is unknown and how to find it out.
func TestSendWithoutAck(t *testing.T) {
	ms := startBroker(t, "alice", "bob")
	alice := dial(t, ms["alice"])
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cid, ack, err := alice.Send(ctx, validated(t, ms["bob"].Pubkey, "hello", "lost-ack"))
	if ack != nil || err == nil || !strings.Contains(err.Error(), "may or may not have been accepted") || cid != "lost-ack" {
		t.Fatalf("Send with the wait over: %s %+v %v", cid, ack, err)
	}
}
