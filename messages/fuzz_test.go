package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// FuzzDecodeSend: the decoder never panics, rejects only with *Error, and a
// request it accepts has a stable fingerprint and canonical meta.
func FuzzDecodeSend(f *testing.F) {
	f.Add([]byte(`{"to":"#alerts","message":"build done","priority":"now"}`), "", false)
	f.Add([]byte(`{"to":"`+pk+`","message":"hello","meta":{"b":1,"a":"x"}}`), "k", true)
	f.Add([]byte(`{"to":"*","message":"x","meta":{"n":1e300,"u":"\u2028"},"replyToId":"r"}`), "", false)
	f.Add([]byte(`{"to":"*","message":"\ud83d\ude00 \\ud800 \ufffd"}`), "", false)
	f.Fuzz(func(t *testing.T, body []byte, key string, hasKey bool) {
		s, err := DecodeSend(body, key, hasKey)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status < 400 || e.Status > 499 || e.Code == "" {
				t.Fatalf("rejection is not a 4xx *Error: %v", err)
			}
			return
		}
		if bytes.ContainsRune(s.Body, utf8.RuneError) && !bytes.ContainsRune(body, utf8.RuneError) &&
			!bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`)) {
			t.Fatalf("accepted a body whose message has a U+FFFD the caller did not send: %q", body)
		}
		if k, ok := repeatedKey(body); ok {
			t.Fatalf("accepted a body that gives %q twice: %q", k, body)
		}
		again, err := DecodeSend(body, key, hasKey)
		if err != nil || again.Fingerprint() != s.Fingerprint() {
			t.Fatalf("decoding the same request twice gave another answer: %v", err)
		}
		if s.Meta != nil {
			again, err := CanonicalMeta(s.Meta)
			if err != nil || !bytes.Equal(again, s.Meta) {
				t.Fatalf("canonical meta is not a fixed point: %q → %q (%v)", s.Meta, again, err)
			}
		}
	})
}

// repeatedKey reports a top-level key of the JSON object body that
// bytes.EqualFold matches to an earlier one (encoding/json's key matching).
func repeatedKey(body []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil {
		return "", false
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		k, _ := t.(string)
		for _, earlier := range keys {
			if bytes.EqualFold([]byte(earlier), []byte(k)) {
				return k, true
			}
		}
		keys = append(keys, k)
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return "", false
		}
	}
	return "", false
}

// FuzzCanonicalJSON: JCS output is valid JSON, a fixed point, and means the
// same as its input.
func FuzzCanonicalJSON(f *testing.F) {
	for _, seed := range []string{`{"b":1,"a":"x"}`, `{"a":[1,2.50,-0,1e21],"é":{"z":null,"y":true}}`,
		`{"s":"\u0000\u001f\"\\/<>&\u2028"}`, `{"n":123456789012345678901234567890}`, `{}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := jcs.Transform(in)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("output is not JSON: %q", out)
		}
		again, err := jcs.Transform(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point: %q → %q (%v)", out, again, err)
		}
		var a, b any
		if json.Unmarshal(in, &a) == nil && json.Unmarshal(out, &b) == nil && !reflect.DeepEqual(a, b) {
			t.Fatalf("meaning changed: %q → %q", in, out)
		}
	})
}

// FuzzRegisterSession: a registration body either fails to decode or to
// validate with a 4xx *Error, or is left in its normal form: a 64-hex
// lower-case token, a session id of the allowed form, a display name
// without control characters.
func FuzzRegisterSession(f *testing.F) {
	tok := strings.Repeat("ab", 32)
	f.Add([]byte(`{"token":"` + tok + `","session_id":"s-1","mesh":"local","display_name":"ant","pid":42}`))
	f.Add([]byte(`{"token":"` + strings.ToUpper(tok) + `","session_id":"x","mesh":"m","display_name":" a ","pid":1,"groups":["@r:lead"]}`))
	f.Add([]byte(`{"token":"` + tok + `","session_id":"../etc","mesh":"m","display_name":"a\u001b[2J","pid":-1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var r RegisterSession
		err := DecodeJSON(body, &r)
		if err == nil {
			if verr := r.Validate(); verr != nil {
				err = verr
			}
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status < 400 || e.Status > 499 || e.Code == "" {
				t.Fatalf("rejection is not a 4xx *Error: %v", err)
			}
			return
		}
		if !sessionTokenForm(r.Token) || !ValidSessionID(r.SessionID) ||
			strings.ContainsFunc(r.DisplayName, isControl) || r.PID <= 0 {
			t.Fatalf("accepted a registration out of form: %+v", r)
		}
	})
}
