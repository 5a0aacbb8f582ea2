package actors

import (
	"encoding/json"
	"log/slog"
	"strings"
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
		if it.Kind != c.kind || string(it.Topic) != c.want {
			t.Errorf("%s: kind %q topic %q, want %q %q", c.name, it.Kind, it.Topic, c.kind, c.want)
		}
		if c.kind == "topic" && (it.Body == nil || *it.Body != "hello") {
			t.Errorf("%s: body %v", c.name, it.Body)
		}
	}
}

// TestInboxItemMail: a push's mail header fills the item (a reply without
// a thread joins the thread of what it answers), leaves its meta; a
// receipt is told apart; a header that does not open is noted in the
// meta and the message kept.
func TestInboxItemMail(t *testing.T) {
	alice, bob := mustIdentity(t), mustIdentity(t)
	in := &InboxActor{cfg: MeshConfig{Slug: "m", Identity: bob}, log: slog.New(slog.DiscardHandler)}
	push := func(req *messages.SendRequest) *messages.PushFrame {
		t.Helper()
		msg := "hello"
		req.To, req.Message = bob.PublicKeyHex(), &msg
		send, err := req.Validate()
		if err != nil {
			t.Fatal(err)
		}
		f, err := alice.SendFrame(send, "c1", send.Fingerprint())
		if err != nil {
			t.Fatal(err)
		}
		return &messages.PushFrame{MessageID: "bm-1", SenderPubkey: alice.PublicKeyHex(), TargetSpec: f.TargetSpec,
			Nonce: f.Nonce, Ciphertext: f.Ciphertext, Meta: f.Meta, ReplyToID: f.ReplyToID, ClientMessageID: "c1"}
	}
	it, rc := in.item(push(&messages.SendRequest{Subject: "s", Importance: "high", AckRequired: true, ReplyToID: "r0",
		Meta: json.RawMessage(`{"k":1}`)}))
	if rc != nil || it.Subject != "s" || it.Importance != "high" || !it.AckRequired || it.ThreadID != "r0" || it.ReplyToID != "r0" ||
		string(it.Meta) != `{"k":1}` || messages.Deref(it.Body) != "hello" {
		t.Fatalf("the item: %+v (receipt %+v)", it, rc)
	}
	if it, _ = in.item(push(&messages.SendRequest{})); it.Importance != "" || it.Subject != "" || it.Meta != nil {
		t.Fatalf("a plain message: %+v", it)
	}

	send, cid := messages.ReceiptSend(messages.Mail{Receipt: messages.ReceiptAck, ReceiptFor: "c0", Name: "alice"}, bob.PublicKeyHex(), "")
	f, err := alice.SendFrame(send, cid, send.Fingerprint())
	if err != nil {
		t.Fatal(err)
	}
	_, rc = in.item(&messages.PushFrame{SenderPubkey: alice.PublicKeyHex(), TargetSpec: f.TargetSpec, Nonce: f.Nonce,
		Ciphertext: f.Ciphertext, Meta: f.Meta, ClientMessageID: cid})
	if rc == nil || rc.Receipt != messages.ReceiptAck || rc.ReceiptFor != "c0" || rc.Name != "alice" {
		t.Fatalf("the receipt: %+v", rc)
	}

	p := push(&messages.SendRequest{Subject: "s"})
	p.Meta = json.RawMessage(strings.Replace(string(p.Meta), `"box":"`, `"box":"AAAA`, 1))
	if it, rc = in.item(p); rc != nil || it.Subject != "" || messages.Deref(it.Body) != "hello" ||
		!strings.Contains(string(it.Meta), "mail_error") {
		t.Fatalf("a header that does not open: %+v", it)
	}
}

func mustIdentity(t *testing.T) *meshcrypto.Identity {
	t.Helper()
	id, err := meshcrypto.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}
