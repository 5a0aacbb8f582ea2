package actors

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
	"github.com/claudemesh/claudemesh-go/transport/wsclient"
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

// TestInboxItemUpstreamPushKinds: the upstream broker's pushes (wire
// protocol §2.3), decoded as the broker connection decodes them, are
// classified by their shape, as they name no target: a drained DM (shape
// 1: a client_message_id, no sender name or member key) is a DM, opened
// with the member key; a multicast (shape 2: the sender's member key, id
// and name, no client_message_id) is a broadcast, or a topic message when
// it names its topic, its body base64 plaintext.
func TestInboxItemUpstreamPushKinds(t *testing.T) {
	alice, bob := mustIdentity(t), mustIdentity(t)
	in := &InboxActor{cfg: MeshConfig{Slug: "m", Identity: bob}}
	msg := "to bob alone"
	send, err := (&messages.SendRequest{To: bob.PublicKeyHex(), Message: &msg}).Validate()
	if err != nil {
		t.Fatal(err)
	}
	dm, err := alice.SendFrame(send, "c1", send.Fingerprint())
	if err != nil {
		t.Fatal(err)
	}
	nonce, plain, err := meshcrypto.EncodePlain([]byte("to everyone"))
	if err != nil {
		t.Fatal(err)
	}
	const tid = "Tq3v9XkR2mN8pL4wZs7yB1cD6fG0hJ5e"
	a := alice.PublicKeyHex()
	for _, c := range []struct {
		name, frame, kind, topic, body string
	}{
		{"shape 1, a drained DM", `{"type":"push","messageId":"q1","meshId":"m","senderPubkey":"` + a +
			`","priority":"next","nonce":"` + dm.Nonce + `","ciphertext":"` + dm.Ciphertext +
			`","createdAt":"2026-05-04T18:00:00.000Z","client_message_id":"c1","request_fingerprint":"` + dm.RequestFingerprint + `"}`,
			"dm", "", msg},
		{"shape 2, a broadcast", `{"type":"push","messageId":"q2","meshId":"m","senderPubkey":"` + a + `","senderMemberPubkey":"` + a +
			`","senderMemberId":"mem-1","senderName":"alice","priority":"next","nonce":"` + nonce + `","ciphertext":"` + plain +
			`","createdAt":"2026-05-04T18:00:00.000Z"}`,
			"topic", "*", "to everyone"},
		{"shape 2, a topic's", `{"type":"push","messageId":"q3","meshId":"m","senderPubkey":"` + a + `","senderMemberPubkey":"` + a +
			`","senderMemberId":"mem-1","senderName":"alice","topic":"` + tid + `","priority":"next","nonce":"` + nonce +
			`","ciphertext":"` + plain + `","createdAt":"2026-05-04T18:00:00.000Z"}`,
			"topic", tid, "to everyone"},
	} {
		f, err := wsclient.DecodeBrokerFrame([]byte(c.frame))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		it, _ := in.item(f.(*messages.PushFrame))
		if it.Kind != c.kind || string(it.Topic) != c.topic || messages.Deref(it.Body) != c.body {
			t.Errorf("%s: kind %q topic %q body %q, want %q %q %q", c.name, it.Kind, it.Topic, messages.Deref(it.Body), c.kind, c.topic, c.body)
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
