package meshcrypto

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestSendFrameMail: a DM's mail header is sealed to its recipient beside
// the body, each under a nonce of its own; nothing of it is readable in the
// frame, the body is the message text alone (what an upstream peer
// reads), and only the recipient opens the header. A topic's header is
// plain, as its body is.
func TestSendFrameMail(t *testing.T) {
	alice, bob, eve := mustGenerate(t), mustGenerate(t), mustGenerate(t)
	msg := "the build on main fails"
	req := &messages.SendRequest{To: bob.PublicKeyHex(), Message: &msg, Subject: "build <broken>", ThreadID: "t1",
		Importance: "urgent", AckRequired: true, Meta: json.RawMessage(`{"ticket":7}`)}
	send, err := req.Validate()
	if err != nil {
		t.Fatal(err)
	}
	f, err := alice.SendFrame(send, "c1", send.Fingerprint().Scoped("m"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(f)
	// Each clear value is looked for with a quote or an underscore, which
	// neither base64 nor hex contains, so sealed bytes never match by chance.
	for _, clear := range []string{`"build`, `"urgent"`, `"t1"`, "ack_required"} {
		if strings.Contains(string(raw), clear) {
			t.Fatalf("the frame shows %q: %s", clear, raw)
		}
	}
	body, err := bob.OpenDM(alice.PublicKeyHex(), f.Nonce, f.Ciphertext)
	if err != nil || string(body) != msg {
		t.Fatalf("the body opens as %q, %v", body, err)
	}
	rest, env, err := messages.SplitMail(f.Meta)
	if err != nil || env == nil || env.Nonce == f.Nonce || string(rest) != `{"ticket":7}` {
		t.Fatalf("the frame's meta: rest %s env %+v %v", rest, env, err)
	}
	h, err := bob.OpenMail(alice.PublicKeyHex(), env)
	if err != nil || *h != (messages.Mail{Subject: "build <broken>", ThreadID: "t1", Importance: "urgent", AckRequired: true}) {
		t.Fatalf("bob reads the header %+v, %v", h, err)
	}
	if _, err := eve.OpenMail(alice.PublicKeyHex(), env); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("eve opened the header: %v", err)
	}
	env.Box = env.Box[:len(env.Box)-4] + "AAAA"
	if _, err := bob.OpenMail(alice.PublicKeyHex(), env); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("a tampered header opened: %v", err)
	}

	req.To = "#builds"
	if send, err = req.Validate(); err != nil {
		t.Fatal(err)
	}
	if f, err = alice.SendFrame(send, "c2", send.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	_, env, err = messages.SplitMail(f.Meta)
	if err != nil || env == nil || env.Header == nil || env.Header.Subject != "build <broken>" {
		t.Fatalf("a topic's envelope: %+v %v", env, err)
	}
	if h, err := eve.OpenMail(alice.PublicKeyHex(), env); err != nil || h.Subject != "build <broken>" {
		t.Fatalf("a topic's header reads as %+v, %v", h, err)
	}
}

// TestSendFrameNoMail: a send without a header makes the frame it always
// made: no envelope in its meta.
func TestSendFrameNoMail(t *testing.T) {
	alice, bob := mustGenerate(t), mustGenerate(t)
	msg := "hi"
	send, err := (&messages.SendRequest{To: bob.PublicKeyHex(), Message: &msg}).Validate()
	if err != nil {
		t.Fatal(err)
	}
	f, err := alice.SendFrame(send, "c1", send.Fingerprint())
	if err != nil || f.Meta != nil {
		t.Fatalf("frame %+v, %v", f, err)
	}
	if _, err := alice.SendFrame(&messages.Send{Destination: messages.Destination{Kind: messages.KindDM, TargetSpec: "zz"},
		Body: []byte("x")}, "c2", messages.Fingerprint{}); !errors.Is(err, ErrBadPublicKey) {
		t.Fatalf("a DM to a bad key: %v", err)
	}
}

// TestSendFrameBadRecipient: a DM to 64 hex characters that are no
// member's key says so in a sender's words, naming the key, not this
// package's (its error still wraps ErrBadPublicKey).
func TestSendFrameBadRecipient(t *testing.T) {
	alice := mustGenerate(t)
	for _, to := range []string{strings.Repeat("ff", 32), order8Point, mixedOrderPoint(t)} {
		msg := "the deploy key is X"
		send, err := (&messages.SendRequest{To: to, Message: &msg, Subject: "key"}).Validate()
		if err != nil {
			t.Fatal(err)
		}
		_, err = alice.SendFrame(send, "c1", send.Fingerprint())
		if !errors.Is(err, ErrBadPublicKey) || !strings.HasPrefix(err.Error(), to+" is not a member's public key") ||
			strings.Contains(err.Error(), "meshcrypto") || strings.Contains(err.Error(), "curve point") {
			t.Errorf("a DM to %s: %v", to, err)
		}
	}
}
