package messages

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecodeFlat: wherever the flat decoder takes a body, encoding/json
// takes it too (strictly, for a send request) and decodes the same value.
func FuzzDecodeFlat(f *testing.F) {
	for _, seed := range []string{
		`{"to":"#builds","message":"build 42 is green","client_message_id":"bench-1"}`,
		` {"to": "aa", "message": "", "priority": "now", "mesh": "local", "reply_to_id": "x", "replyToId": "y"} `,
		`{"type":"push","messageId":"m1","meshId":"mesh","senderPubkey":"ab","nonce":"bm9uY2U=","ciphertext":"Y2lwaGVy",` +
			`"targetSpec":"ab","priority":"next","createdAt":"2026-11-25T00:00:00Z","client_message_id":"c1"}`,
		`{"type":"ack","id":"c1","messageId":"b1","queued":true,"code":201,"client_message_id":"c1","broker_message_id":"b1",` +
			`"history_available":false,"retry_after_ms":-5,"_reqId":"r"}`,
		`{"type":"ack","code":1e3}`, `{"type":"ack","code":012}`, `{"message":null}`, `{"to":"\u0041"}`, `{"To":"x"}`,
		`{"to":"é","message":"\xff"}`, `{"to":"a","to":"b"}`, `{}`, `{"type":"push","meta":{}}`, `{"code":9223372036854775808}`,
		`{"queued":truex}`, `{"to":"a"}x`, `{"to":"a",}`,
		`{"type":"push","messageId":"m","meta":{"claudemesh_mail":{"v":1,"nonce":"bm9uY2U=","box":"Ym94"}}}`,
		`{"type":"push","meta": { "a" : [1, {"b":"}"}], "c":"\"{" } ,"nonce":"n"}`, `{"meta":{"a":}}`, `{"meta":{"a":1]}`,
		`{"meta":{"a":"\u00e9\ud800"}}`, `{"meta":{}} `, `{"meta":{"a":"b"}`, `{"meta":{"a":"\"}`, `{"meta":[1]}`,
		`{"meta":null}`, "{\"meta\":{\"k\":\"\xff\"}}", `{"meta":{"a":1},"meta":{"b":2}}`,
		`{"subject":"s","thread_id":"t","reply_to_id":"r","importance":"high","ack_required":true,"receipt":"held",` +
			`"receipt_for":"c1","until":"2026-11-28T10:00:00.5Z","reason":"x","name":"cat"}`, `{"Subject":"s"}`,
		`{"type":"send","id":"a","client_message_id":"a","request_fingerprint":"00","targetSpec":"#t","priority":"now",` +
			`"nonce":"AA==","ciphertext":"AA==","replyToId":"r","meta":{"claudemesh_mail":{"v":1}},"first_send":true}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var send, sendJSON SendRequest
		if decodeFlat(data, &send, sendRequestFields) {
			if err := decodeStrict(data, &sendJSON); err != nil || !reflect.DeepEqual(send, sendJSON) {
				t.Fatalf("send %q: flat %+v, encoding/json %+v (%v)", data, send, sendJSON, err)
			}
		}
		var push, pushJSON PushFrame
		if push.decodeFlat(data) {
			if err := json.Unmarshal(data, &pushJSON); err != nil || !reflect.DeepEqual(push, pushJSON) {
				t.Fatalf("push %q: flat %+v, encoding/json %+v (%v)", data, push, pushJSON, err)
			}
		}
		var sf, sfJSON SendFrame
		if sf.decodeFlat(data) {
			if err := json.Unmarshal(data, &sfJSON); err != nil || !reflect.DeepEqual(sf, sfJSON) {
				t.Fatalf("send frame %q: flat %+v, encoding/json %+v (%v)", data, sf, sfJSON, err)
			}
		}
		var mail, mailJSON Mail
		if decodeFlat(data, &mail, mailFields) {
			if err := json.Unmarshal(data, &mailJSON); err != nil || mail != mailJSON {
				t.Fatalf("mail header %q: flat %+v, encoding/json %+v (%v)", data, mail, mailJSON, err)
			}
		}
		var ack, ackJSON AckFrame
		if ack.decodeFlat(data) {
			if err := json.Unmarshal(data, &ackJSON); err != nil || !reflect.DeepEqual(ack, ackJSON) {
				t.Fatalf("ack %q: flat %+v, encoding/json %+v (%v)", data, ack, ackJSON, err)
			}
		}
	})
}

// TestDecodeFlatTakesTheHotShapes: the bodies the benchmarks and the
// brokers send are taken by the flat decoder, not handed on.
func TestDecodeFlatTakesTheHotShapes(t *testing.T) {
	var s SendRequest
	if !decodeFlat([]byte(`{"to":"#t","message":"hi","client_message_id":"c"}`), &s, sendRequestFields) ||
		s.To != "#t" || s.Message == nil || *s.Message != "hi" || s.ClientMessageID != "c" {
		t.Errorf("send request: %+v", s)
	}
	var p PushFrame
	if !p.decodeFlat([]byte(`{"type":"push","messageId":"m","senderPubkey":"k","nonce":"n","ciphertext":"c"}`)) || p.Ciphertext != "c" {
		t.Errorf("push: %+v", p)
	}
	var m PushFrame
	const mail = `{"claudemesh_mail":{"v":1,"nonce":"bm9uY2U=","box":"Ym94"}}`
	if !m.decodeFlat([]byte(`{"type":"push","messageId":"m","nonce":"n","ciphertext":"c","meta":`+mail+`}`)) ||
		string(m.Meta) != mail {
		t.Errorf("push of mail: %+v", m)
	}
	var f SendFrame
	if !f.decodeFlat([]byte(`{"type":"send","id":"i","client_message_id":"i","nonce":"n","ciphertext":"c","meta":`+mail+
		`,"first_send":true}`)) || string(f.Meta) != mail || !f.FirstSend {
		t.Errorf("send frame of mail: %+v", f)
	}
	var a AckFrame
	if !a.decodeFlat([]byte(`{"type":"ack","queued":true,"code":201,"retry_after_ms":5}`)) || !a.Queued || a.Code != 201 ||
		a.RetryAfterMs == nil || *a.RetryAfterMs != 5 {
		t.Errorf("ack: %+v", a)
	}
}
