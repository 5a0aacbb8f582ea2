package actors

import (
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// TestInboxItemTopic: a push is a topic message when its target is a topic
// (our broker) or, with no target, when it names a topic (the upstream
// broker's multicast push); either way the item carries the topic.
func TestInboxItemTopic(t *testing.T) {
	id, err := meshcrypto.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	in := &InboxActor{cfg: MeshConfig{Slug: "m", Identity: id}}
	nonce, body, err := meshcrypto.EncodePlain([]byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	const tid = "Tq3v9XkR2mN8pL4wZs7yB1cD6fG0hJ5e"
	for _, c := range []struct {
		name       string
		push       messages.PushFrame
		kind, want string
	}{
		{"our broker: the target", messages.PushFrame{TargetSpec: "#" + tid}, "topic", "#" + tid},
		{"upstream: the topic field", messages.PushFrame{Topic: tid}, "topic", tid},
		{"a broadcast (to the topic *)", messages.PushFrame{TargetSpec: "*"}, "topic", "*"},
		{"a DM", messages.PushFrame{TargetSpec: id.PublicKeyHex()}, "dm", ""},
	} {
		p := c.push
		p.MessageID, p.SenderPubkey, p.Nonce, p.Ciphertext = "bm-1", id.PublicKeyHex(), nonce, body
		it, _ := in.item(&p)
		if it.Kind != c.kind || it.Topic != c.want {
			t.Errorf("%s: kind %q topic %q, want %q %q", c.name, it.Kind, it.Topic, c.kind, c.want)
		}
		if c.kind == "topic" && (it.Body == nil || *it.Body != "hello") {
			t.Errorf("%s: body %v", c.name, it.Body)
		}
	}
}
