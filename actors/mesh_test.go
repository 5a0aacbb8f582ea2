package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// TestMeshPanicIsolated: a panic in one mesh's inbox restarts that mesh's
// subtree; the other mesh, the store and the accept path keep answering,
// and the daemon is not stopped.
func TestMeshPanicIsolated(t *testing.T) {
	var meshes []MeshConfig
	faults := &Faults{InboxPanic: "a"}
	for _, slug := range []string{"a", "b"} {
		id, _ := meshcrypto.GenerateIdentity()
		meshes = append(meshes, MeshConfig{Slug: slug, MeshID: "m-" + slug, MemberID: "u-" + slug, Identity: id,
			URL: "ws://127.0.0.1:1/ws"}) // no broker: the subtree keeps redialling
	}
	tree, fatal, _ := openTree(t, faults, meshes...)
	root := tree.System.Root
	ask := func(pid *actor.PID, msg any) (any, error) {
		return root.RequestFuture(pid, msg, 5*time.Second).Result()
	}

	a, b := tree.Meshes["a"], tree.Meshes["b"]
	root.Send(a.Inbox, &inboundPush{push: &messages.PushFrame{Type: messages.TypePush, MessageID: "bm-1"}}) // mesh a's inbox panics
	wait.For(t, 5*time.Second, "the inbox of mesh a to take the fault", faults.InboxPanicked.Load)
	for i := 0; i < 50; i++ { // the other mesh and the store answer throughout
		if r, err := ask(b.Conn, &messages.MeshStatus{}); err != nil || r.(*messages.MeshStatusReply).Breaker == "" {
			t.Fatalf("mesh b stopped answering: %v %v", r, err)
		}
		if _, err := ask(tree.Store, &messages.OutboxStats{}); err != nil {
			t.Fatalf("store stopped answering: %v", err)
		}
	}
	// Mesh a's subtree was restarted, not stopped: its actors answer again.
	if r, err := ask(a.Conn, &messages.MeshStatus{}); err != nil {
		t.Fatalf("mesh a did not come back: %v %v", r, err)
	}
	res, err := ask(tree.Accept, &messages.AcceptSend{Mesh: "a", ClientMessageID: "after-panic", RowID: "01J0000000000000000000000Z",
		Payload: []byte("{}"), Now: 1})
	if r, ok := res.(*messages.AcceptResult); err != nil || !ok || r.Err != nil || !r.Inserted {
		t.Fatalf("accept after the panic: %v %#v", err, res)
	}
	select {
	case err := <-fatal:
		t.Fatalf("the panic stopped the daemon: %v", err)
	default:
	}
}
