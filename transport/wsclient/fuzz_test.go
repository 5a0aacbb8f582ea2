package wsclient

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

// FuzzDecodeBrokerFrame: whatever a broker sends, DecodeBrokerFrame answers
// a frame that re-encodes with its type, an *UnknownFrame holding the bytes
// it was given, or a *messages.FrameError with a code; it never panics.
func FuzzDecodeBrokerFrame(f *testing.F) {
	for _, seed := range []string{
		`{"type":"hello_ack","presenceId":"p","memberDisplayName":"alice","restored":{"groups":[]}}`,
		`{"type":"ack","id":"a","messageId":"m","queued":true,"client_message_id":"a","dedupe":"new"}`,
		`{"type":"ack","id":"a","code":409,"error":"idempotency_key_reused","broker_fingerprint_prefix":"0011223344556677"}`,
		`{"type":"push","messageId":"m","meshId":"x","senderPubkey":"ab","priority":"now","nonce":"AA==","ciphertext":"AA==","createdAt":"2026-01-01T00:00:00Z"}`,
		`{"type":"peers_list","peers":[{"pubkey":"ab","displayName":"b","status":"idle"}],"_reqId":"r"}`,
		`{"type":"error","code":"no_hello","message":"m"}`,
		`{"type":"feature_negotiation_response","supported":{"client_message_id":{"max_payload_bytes":65536}}}`,
		`{"type":"feature_negotiation_failed","close_reason":{"kind":"k"},"missing":["x"]}`,
		`{"type":"state_result","key":"k"}`,
		`{"type":null}`,
		`[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := DecodeBrokerFrame(data)
		if err != nil {
			var fe *messages.FrameError
			if !errors.As(err, &fe) || fe.Code == "" {
				t.Fatalf("not a FrameError: %v", err)
			}
			return
		}
		if u, ok := v.(*UnknownFrame); ok {
			if string(u.Data) != string(data) {
				t.Fatalf("unknown frame %q kept %q, not the bytes it was given", u.Type, u.Data)
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
