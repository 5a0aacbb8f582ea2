package messages

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeClientFrame(t *testing.T) {
	cases := []struct {
		in   string
		want string // %T of the result, or the FrameError code
	}{
		{`{"type":"hello","meshId":"m","memberId":"x","pubkey":"ab","sessionId":"s","timestamp":1,"signature":"00","model":"extra fields are ignored"}`, "*messages.HelloFrame"},
		{`{"type":"session_hello","meshId":"m","parentMemberPubkey":"p","sessionPubkey":"s","parentAttestation":{"expiresAt":5}}`, "*messages.SessionHelloFrame"},
		{`{"type":"send","id":"a","client_message_id":"a","targetSpec":"*","priority":"next","nonce":"","ciphertext":""}`, "*messages.SendFrame"},
		{`{"type":"client_ack","clientMessageId":"a"}`, "*messages.ClientAckFrame"},
		{`{"type":"list_peers","_reqId":"pl-1"}`, "*messages.ListPeersFrame"},
		{`{"type":"set_status","status":"dnd"}`, "*messages.SetStatusFrame"},
		{`{"type":"set_summary","summary":"s"}`, "*messages.SetSummaryFrame"},
		{`{"type":"set_visible","visible":false}`, "*messages.SetVisibleFrame"},
		{`{"type":"set_profile","bio":"b","capabilities":["x"]}`, "*messages.SetProfileFrame"},
		{`{"type":"feature_negotiation_request","require":["client_message_id_dedupe"],"optional":[]}`, "*messages.FeatureNegotiationRequestFrame"},
		{`{"type":"hello","meshId":"m","memberId":"x","pubkey":"ab","sessionId":"s","hostname":"h","daemonVersion":"1.2.3","timestamp":1,"signature":"00"}`, "*messages.HelloFrame"},
		{`{"type":"list_nodes","_reqId":"nd-1"}`, "*messages.ListNodesFrame"},
		{`not json`, FrameInvalidJSON},
		{`[1,2]`, FrameInvalidJSON},
		{`{"no":"type"}`, FrameInvalidJSON},
		{`{"type":7}`, FrameInvalidJSON},
		{`{"type":"graph_query","query":"q"}`, FrameUnknownType},
		{`{"type":"hello","timestamp":"soon"}`, FrameInvalidJSON},
	}
	for _, c := range cases {
		v, err := DecodeClientFrame([]byte(c.in))
		got := fmt.Sprintf("%T", v)
		var fe *FrameError
		if errors.As(err, &fe) {
			got = fe.Code
		} else if err != nil {
			t.Fatalf("%s: non-FrameError %v", c.in, err)
		}
		if got != c.want {
			t.Errorf("%s: got %s, want %s", c.in, got, c.want)
		}
	}
}

// FuzzDecodeClientFrame: the frame decoder never panics, fails only with
// *FrameError, and a decoded frame re-encodes to JSON carrying its type.
func FuzzDecodeClientFrame(f *testing.F) {
	for _, seed := range []string{
		`{"type":"hello","meshId":"m","memberId":"x","pubkey":"ab","sessionId":"s","timestamp":1700000000000,"signature":"00"}`,
		`{"type":"send","id":"a","client_message_id":"a","request_fingerprint":"00","targetSpec":"#t","priority":"now","nonce":"AA==","ciphertext":"AA==","meta":{"k":1}}`,
		`{"type":"client_ack","clientMessageId":"a","brokerMessageId":"b"}`,
		`{"type":"set_profile","avatar":null,"capabilities":[]}`,
		`{"type":"session_hello","parentAttestation":{"sessionPubkey":"s","expiresAt":-1}}`,
		`{"type":"feature_negotiation_request","require":null}`,
		`{"type":""}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := DecodeClientFrame(data)
		if err != nil {
			var fe *FrameError
			if !errors.As(err, &fe) || fe.Code == "" {
				t.Fatalf("not a FrameError: %v", err)
			}
			return
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("decoded frame does not re-encode: %v", err)
		}
		var head struct{ Type string }
		if json.Unmarshal(out, &head) != nil || head.Type == "" {
			t.Fatalf("re-encoded frame lost its type: %s", out)
		}
	})
}

// FuzzDecodeFrameFastPath: DecodeFrame's one-parse path answers exactly
// what the two-parse path does — type, frame and error — for any input.
func FuzzDecodeFrameFastPath(f *testing.F) {
	for _, seed := range []string{
		`{"type":"send","id":"a","client_message_id":"a","request_fingerprint":"00","targetSpec":"#t","priority":"now","nonce":"AA==","ciphertext":"AA=="}`,
		`{"type":"client_ack","clientMessageId":"a"}`,
		`{"type":"send","Type":"hello"}`,
		`{"type":"send","type":""}`,
		`{"type":"send","\u0074ype":"client_ack"}`,
		`{"type":"nope"}`,
		`{"type":"send",`,
		`{"type":"send","id":1}`,
		` {"type":"send"}`,
		`{"type":"push","messageId":"m","senderPubkey":"k","nonce":"n","ciphertext":"c","client_message_id":"a"}`,
		`{"type":"push","messageId":"m","meta":{"k":1}}`,
		`{"type":"ack","id":"a","queued":true,"code":201,"retry_after_ms":5}`,
		`{"type":"ack","type":"push"}`,
	} {
		f.Add([]byte(seed))
	}
	// The frames a broker sends have flat decoders (push, ack).
	newServerFrame := func(typ string) any {
		switch typ {
		case TypePush:
			return new(PushFrame)
		case TypeAck:
			return new(AckFrame)
		}
		return newClientFrame(typ)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, newFrame := range []func(string) any{newClientFrame, newServerFrame} {
			typ, v, err := DecodeFrame(data, newFrame)
			ptyp, pv, perr := decodeProbed(data, newFrame)
			if typ != ptyp || !reflect.DeepEqual(v, pv) || fmt.Sprint(err) != fmt.Sprint(perr) {
				t.Fatalf("%q: fast path %q %#v %v; two parses %q %#v %v", data, typ, v, err, ptyp, pv, perr)
			}
		}
	})
}

// BenchmarkDecodeFrame: a send frame as a daemon writes it, decoded by the
// broker's reader (one-parse, two-parse; send-mail with a mail envelope in
// its meta), and a push of mail as a broker writes it, decoded by a
// daemon's (push-mail).
//
//	go test -run='^$' -bench=BenchmarkDecodeFrame ./messages/
func BenchmarkDecodeFrame(b *testing.B) {
	frame := []byte(`{"type":"send","id":"01JD0000000000000000000000","client_message_id":"01JD0000000000000000000000",` +
		`"request_fingerprint":"` + strings.Repeat("ab", 32) + `","targetSpec":"` + strings.Repeat("cd", 32) + `","priority":"next",` +
		`"nonce":"` + strings.Repeat("A", 32) + `","ciphertext":"` + strings.Repeat("B", 344) + `"}`)
	b.Run("one-parse", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := DecodeFrame(frame, newClientFrame); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("two-parse", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := decodeProbed(frame, newClientFrame); err != nil {
				b.Fatal(err)
			}
		}
	})
	push := []byte(`{"type":"push","messageId":"01JD0000000000000000000000","meshId":"local","senderPubkey":"` +
		strings.Repeat("ab", 32) + `","senderName":"mailer-0","targetSpec":"` + strings.Repeat("cd", 32) +
		`","priority":"next","nonce":"` + strings.Repeat("A", 32) + `","ciphertext":"` + strings.Repeat("B", 344) +
		`","createdAt":"2026-11-29T15:00:00.000Z","client_message_id":"01JD0000000000000000000000","history_id":"h1",` +
		`"meta":{"claudemesh_mail":{"v":1,"nonce":"` + strings.Repeat("C", 32) + `","box":"` + strings.Repeat("D", 160) + `"}}}`)
	sendMail := []byte(strings.TrimSuffix(string(frame), "}") + `,"meta":{"claudemesh_mail":{"v":1,"nonce":"` +
		strings.Repeat("C", 32) + `","box":"` + strings.Repeat("D", 160) + `"}}}`)
	b.Run("send-mail", func(b *testing.B) {
		for b.Loop() {
			if _, v, err := DecodeFrame(sendMail, newClientFrame); err != nil || len(v.(*SendFrame).Meta) == 0 {
				b.Fatal(err)
			}
		}
	})
	newPush := func(string) any { return new(PushFrame) }
	b.Run("push-mail", func(b *testing.B) {
		for b.Loop() {
			if _, v, err := DecodeFrame(push, newPush); err != nil || len(v.(*PushFrame).Meta) == 0 {
				b.Fatal(err)
			}
		}
	})
}
