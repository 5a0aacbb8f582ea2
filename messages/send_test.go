package messages

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

const pk = "3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29"

func TestDecodeSendRejects(t *testing.T) {
	long := strings.Repeat("x", MaxMessageBytes+1)
	cases := []struct {
		name, body, key string
		hasKey          bool
		status          int
		code            string
	}{
		{"empty body", ``, "", false, 400, CodeInvalidJSON},
		{"array", `[1]`, "", false, 400, CodeInvalidJSON},
		{"null", `null`, "", false, 400, CodeInvalidJSON},
		{"truncated", `{"to":"*","message":"x"`, "", false, 400, CodeInvalidJSON},
		{"trailing data", `{"to":"*","message":"x"} {}`, "", false, 400, CodeInvalidJSON},
		{"invalid utf-8", "{\"to\":\"*\",\"message\":\"\xff\"}", "", false, 400, CodeInvalidUnicode},
		{"invalid utf-8 in a key", "{\"to\":\"*\",\"message\":\"x\",\"m\xc3\":1}", "", false, 400, CodeInvalidUnicode},
		{"lone high surrogate", `{"to":"*","message":"\ud800"}`, "", false, 400, CodeInvalidUnicode},
		{"lone high surrogate ending a string", `{"to":"*","message":"ab\uD83D"}`, "", false, 400, CodeInvalidUnicode},
		{"high surrogate before a non-surrogate", `{"to":"*","message":"\ud83d\u0041"}`, "", false, 400, CodeInvalidUnicode},
		{"two high surrogates", `{"to":"*","message":"\ud83d\ud83d"}`, "", false, 400, CodeInvalidUnicode},
		{"lone low surrogate", `{"to":"*","message":"x\udc00y"}`, "", false, 400, CodeInvalidUnicode},
		{"low then high", `{"to":"*","message":"\ude00\ud83d"}`, "", false, 400, CodeInvalidUnicode},
		{"lone surrogate in mesh", `{"to":"*","message":"x","mesh":"\udfff"}`, "", false, 400, CodeInvalidUnicode},
		{"lone surrogate in a meta key", `{"to":"*","message":"x","meta":{"\ud800":1}}`, "", false, 400, CodeInvalidUnicode},
		{"lone surrogate in meta", `{"to":"*","message":"x","meta":{"a":["\udbff"]}}`, "", false, 400, CodeInvalidUnicode},
		{"duplicate to", `{"to":"*","to":"#a","message":"x"}`, "", false, 400, CodeDuplicateKey},
		{"duplicate message", `{"to":"*","message":"a","priority":"now","message":"b"}`, "", false, 400, CodeDuplicateKey},
		{"duplicate in another case", `{"to":"*","message":"x","TO":"*"}`, "", false, 400, CodeDuplicateKey},
		{"duplicate through an escape", `{"to":"*","message":"x","\u0074o":"*"}`, "", false, 400, CodeDuplicateKey},
		{"duplicate through a fold", `{"to":"*","message":"x","meſſage":"y"}`, "", false, 400, CodeDuplicateKey},
		{"duplicate meta", `{"to":"*","message":"x","meta":{"a":1},"meta":null}`, "", false, 400, CodeDuplicateKey},
		{"duplicate client id", `{"to":"*","message":"x","client_message_id":"a","client_message_id":"a"}`, "", false, 400, CodeDuplicateKey},
		{"meta too large as framed", `{"to":"*","message":"x","meta":{"k":"` + strings.Repeat("<", MaxMetaBytes/6+1) + `"}}`, "", false, 400, CodeInvalidMeta},
		{"unknown field", `{"to":"*","message":"x","priorty":"now"}`, "", false, 400, CodeUnknownField},
		{"wrong type", `{"to":5,"message":"x"}`, "", false, 400, CodeInvalidJSON},
		{"missing to", `{"message":"x"}`, "", false, 400, CodeMissingTo},
		{"name of nothing visible", `{"to":"\u200b \u202e","message":"x"}`, "", false, 400, CodeInvalidTo},
		{"name too long", `{"to":"` + strings.Repeat("n", MaxPeerNameBytes+1) + `","message":"x"}`, "", false, 400, CodeInvalidTo},
		{"bad topic", `{"to":"#has space","message":"x"}`, "", false, 400, CodeInvalidTo},
		{"empty group", `{"to":"@","message":"x"}`, "", false, 400, CodeInvalidTo},
		{"missing message", `{"to":"*"}`, "", false, 400, CodeMissingMessage},
		{"empty message", `{"to":"*","message":""}`, "", false, 400, CodeMissingMessage},
		{"NUL in the message", `{"to":"*","message":"a\u0000b"}`, "", false, 400, CodeMessageHasNUL},
		{"message of a NUL", `{"to":"*","message":"\u0000"}`, "", false, 400, CodeMessageHasNUL},
		{"message too large", `{"to":"*","message":"` + long + `"}`, "", false, 413, CodeMessageTooLarge},
		{"bad priority", `{"to":"*","message":"x","priority":"urgent"}`, "", false, 400, CodeInvalidPriority},
		{"meta array", `{"to":"*","message":"x","meta":[1]}`, "", false, 400, CodeInvalidMeta},
		{"meta string", `{"to":"*","message":"x","meta":"a"}`, "", false, 400, CodeInvalidMeta},
		{"meta too large", `{"to":"*","message":"x","meta":{"k":"` + strings.Repeat("y", MaxMetaBytes) + `"}}`, "", false, 400, CodeInvalidMeta},
		{"id with space", `{"to":"*","message":"x","client_message_id":"a b"}`, "", false, 400, CodeInvalidClientID},
		{"id too long", `{"to":"*","message":"x","client_message_id":"` + strings.Repeat("a", 129) + `"}`, "", false, 400, CodeInvalidClientID},
		{"id non-ascii", `{"to":"*","message":"x","client_message_id":"é"}`, "", false, 400, CodeInvalidClientID},
		{"empty header", `{"to":"*","message":"x"}`, "", true, 400, CodeInvalidClientID},
		{"header and body differ", `{"to":"*","message":"x","client_message_id":"a"}`, "b", true, 400, CodeIdempotencyKeyDiffer},
		{"reply ids differ", `{"to":"*","message":"x","reply_to_id":"a","replyToId":"b"}`, "", false, 400, CodeInvalidReplyTo},
		{"reply id bad", `{"to":"*","message":"x","reply_to_id":"a b"}`, "", false, 400, CodeInvalidReplyTo},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeSend([]byte(c.body), c.key, c.hasKey)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want *Error %s", err, c.code)
			}
			if e.Status != c.status || e.Code != c.code {
				t.Fatalf("got %d %s (%s), want %d %s", e.Status, e.Code, e.Detail, c.status, c.code)
			}
			if e.Code == CodeMessageTooLarge && !strings.Contains(e.Detail, strconv.Itoa(len(long))+" bytes; the limit is 32768") {
				t.Errorf("message_too_large says %q; want the size and the limit", e.Detail)
			}
		})
	}
}

func TestDecodeSendAccepts(t *testing.T) {
	cases := []struct {
		name, body, key string
		hasKey          bool
		want            Send
	}{
		{"dm defaults", `{"to":"` + strings.ToUpper(pk) + `","message":"hi"}`, "", false,
			Send{Destination: Destination{KindDM, pk, pk}, Priority: "next", Body: []byte("hi")}},
		{"topic", `{"to":"#ops/builds","message":"hi","priority":"low"}`, "", false,
			Send{Destination: Destination{KindTopic, "ops/builds", "#ops/builds"}, Priority: "low", Body: []byte("hi")}},
		{"group keeps sigil", `{"to":"@oncall","message":"hi"}`, "", false,
			Send{Destination: Destination{KindTopic, "@oncall", "@oncall"}, Priority: "next", Body: []byte("hi")}},
		{"broadcast", `{"to":"*","message":"hi","priority":"now"}`, "", false,
			Send{Destination: Destination{KindTopic, "*", "*"}, Priority: "now", Body: []byte("hi")}},
		{"header wins", `{"to":"*","message":"hi"}`, "key-1", true,
			Send{ClientMessageID: "key-1", Destination: Destination{KindTopic, "*", "*"}, Priority: "next", Body: []byte("hi")}},
		{"header equals body", `{"to":"*","message":"hi","client_message_id":"key-1"}`, "key-1", true,
			Send{ClientMessageID: "key-1", Destination: Destination{KindTopic, "*", "*"}, Priority: "next", Body: []byte("hi")}},
		{"escaped backslash before u", `{"to":"*","message":"\\ud800"}`, "", false,
			Send{Destination: Destination{KindTopic, "*", "*"}, Priority: "next", Body: []byte(`\ud800`)}},
		{"surrogate pair", `{"to":"*","message":"\ud83d\ude00\uD83D\uDE00"}`, "", false,
			Send{Destination: Destination{KindTopic, "*", "*"}, Priority: "next", Body: []byte("😀😀")}},
		{"nested keys may repeat case-insensitively", `{"to":"*","message":"hi","meta":{"a":1,"A":2}}`, "", false,
			Send{Destination: Destination{KindTopic, "*", "*"}, Priority: "next", Body: []byte("hi"), Meta: []byte(`{"A":2,"a":1}`)}},
		{"display name, as typed", `{"to":"Alice ","message":"hi"}`, "", false,
			Send{Destination: Destination{KindDM, "Alice ", ""}, Priority: "next", Body: []byte("hi")}},
		{"pubkey prefix is a name", `{"to":"` + pk[:63] + `","message":"hi"}`, "", false,
			Send{Destination: Destination{KindDM, pk[:63], ""}, Priority: "next", Body: []byte("hi")}},
		{"camel reply id and mesh", `{"to":"*","message":"hi","replyToId":"m-1","mesh":"prod","meta":{"z":1,"a":"<&>"}}`, "", false,
			Send{Mesh: "prod", Destination: Destination{KindTopic, "*", "*"}, Priority: "next", Body: []byte("hi"),
				ReplyToID: "m-1", Meta: []byte(`{"a":"<&>","z":1}`)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := DecodeSend([]byte(c.body), c.key, c.hasKey)
			if err != nil {
				t.Fatal(err)
			}
			if got.Mesh != c.want.Mesh || got.ClientMessageID != c.want.ClientMessageID || got.Destination != c.want.Destination ||
				got.Priority != c.want.Priority || string(got.Body) != string(c.want.Body) ||
				got.ReplyToID != c.want.ReplyToID || string(got.Meta) != string(c.want.Meta) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestReassignFrame(t *testing.T) {
	s, err := DecodeSend([]byte(`{"to":"#a","message":"hi","meta":{"k":1}}`), "", false)
	if err != nil {
		t.Fatal(err)
	}
	frame := NewSendFrame(s, "old", s.Fingerprint(), "bm9uY2U=", "Y2lwaGVy")
	orig, _ := json.Marshal(frame)
	got, err := ReassignFrame(orig, "new")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.ReplaceAll(string(orig), `"old"`, `"new"`)
	if string(got) != want {
		t.Fatalf("reassigned frame\n%s\nwant\n%s", got, want)
	}
	if _, err := ReassignFrame([]byte("not json"), "x"); err == nil {
		t.Fatal("a corrupt payload must be an error")
	}
}

// TestDuplicateKeyNamesTheKey: the 400 says which key repeats, as the
// caller wrote it.
func TestDuplicateKeyNamesTheKey(t *testing.T) {
	_, err := DecodeSend([]byte(`{"to":"*","message":"x","Priority":"now","priority":"low"}`), "", false)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeDuplicateKey || !strings.Contains(e.Detail, `"priority"`) {
		t.Fatalf("got %v, want duplicate_key naming priority", err)
	}
	if err := DecodeJSON([]byte(`{"ids":["a"],"ids":["b"]}`), &InboxSeenRequest{}); !errors.Is(err, &Error{Code: CodeDuplicateKey}) {
		t.Fatalf("another IPC body with a key twice: %v", err)
	}
}

// TestSendFrameWithinBrokerLimit: the largest send a request may make —
// the longest message sealed as a DM, the longest ids and meta made only
// of characters the frame's JSON escapes — is a frame the upstream broker
// takes.
func TestSendFrameWithinBrokerLimit(t *testing.T) {
	long := strings.Repeat("<", MaxIDLength)
	meta := `{"k":"` + strings.Repeat("<", (MaxMetaBytes-8)/6) + `"}`
	body := `{"to":"` + pk + `","message":"` + strings.Repeat("x", MaxMessageBytes) + `","client_message_id":"` + long +
		`","reply_to_id":"` + long + `","priority":"next","meta":` + meta + `}`
	s, err := DecodeSend([]byte(body), "", false)
	if err != nil {
		t.Fatal(err)
	}
	nonce := strings.Repeat("A", base64.StdEncoding.EncodedLen(24))
	ciphertext := strings.Repeat("A", base64.StdEncoding.EncodedLen(MaxMessageBytes+16)) // the Poly1305 tag
	frame, err := NewSendFrame(s, s.ClientMessageID, Fingerprint{}, nonce, ciphertext).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if len(frame) > MaxFrameBytes {
		t.Fatalf("the largest send frame is %d bytes, over %d", len(frame), MaxFrameBytes)
	}
	t.Logf("largest send frame: %d bytes of %d", len(frame), MaxFrameBytes)
}
