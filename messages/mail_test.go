package messages

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// TestSendMailFields: each mail field of a send request is checked, and
// a bad one is refused with its own code before anything is built.
func TestSendMailFields(t *testing.T) {
	base := `{"to":"` + pk + `","message":"hi"`
	for _, c := range []struct {
		name, body, code string
	}{
		{"a subject over 200 bytes", base + `,"subject":"` + strings.Repeat("é", 101) + `"}`, CodeInvalidSubject},
		{"a subject of two lines", base + `,"subject":"a\nb"}`, CodeInvalidSubject},
		{"a subject with a tab", base + `,"subject":"a\tb"}`, CodeInvalidSubject},
		{"a thread with a space", base + `,"thread_id":"a b"}`, CodeInvalidThread},
		{"a thread of 129 characters", base + `,"thread_id":"` + strings.Repeat("t", 129) + `"}`, CodeInvalidThread},
		{"an unknown importance", base + `,"importance":"critical"}`, CodeInvalidImportance},
		{"importance in capitals", base + `,"importance":"HIGH"}`, CodeInvalidImportance},
		{"ack_required as a string", base + `,"ack_required":"yes"}`, CodeInvalidJSON},
		{"the mail key in meta", base + `,"meta":{"claudemesh_mail":{"v":1}}}`, CodeInvalidMeta},
		{"a bad reply id", base + `,"reply_to_id":"a b","subject":"s"}`, CodeInvalidReplyTo},
	} {
		_, err := DecodeSend([]byte(c.body), "", false)
		var e *Error
		if !errors.As(err, &e) || e.Code != c.code || e.Status != 400 {
			t.Errorf("%s: %v, want 400 %s", c.name, err, c.code)
		}
	}
	for _, c := range []struct {
		body string
		want *Mail
	}{
		{base + `}`, nil},
		{base + `,"importance":"normal","ack_required":false}`, nil},
		{base + `,"importance":"high"}`, &Mail{Importance: ImportanceHigh}},
		{base + `,"subject":"Re: <build> & \"x\"","thread_id":"t1","reply_to_id":"r1","ack_required":true}`,
			&Mail{Subject: `Re: <build> & "x"`, ThreadID: "t1", ReplyToID: "r1", AckRequired: true}},
		{base + `,"meta":{"claudemesh_mail_not":1},"subject":"s"}`, &Mail{Subject: "s"}},
	} {
		s, err := DecodeSend([]byte(c.body), "", false)
		if err != nil || (s.Mail == nil) != (c.want == nil) || s.Mail != nil && *s.Mail != *c.want {
			t.Errorf("%s: %+v %v, want %+v", c.body, s.Mail, err, c.want)
		}
	}
}

// TestMailFingerprint: the fingerprint covers every mail field as
// requested; importance normal is no field, and a reply with no other
// field keeps the fingerprint it had before mail headers.
func TestMailFingerprint(t *testing.T) {
	fp := func(body string) Fingerprint {
		t.Helper()
		s, err := DecodeSend([]byte(`{"to":"`+pk+`","message":"hi"`+body+`}`), "", false)
		if err != nil {
			t.Fatal(err)
		}
		return s.Fingerprint()
	}
	plain := fp(``)
	if fp(`,"importance":"normal"`) != plain {
		t.Error("importance normal changed the fingerprint")
	}
	reply, err := DecodeSend([]byte(`{"to":"`+pk+`","message":"hi","reply_to_id":"r1"}`), "", false)
	if err != nil || reply.Mail == nil {
		t.Fatalf("a reply: %+v %v", reply, err)
	}
	before := *reply
	before.Mail = nil // as the send was fingerprinted before mail headers
	if reply.Fingerprint() != before.Fingerprint() {
		t.Error("a reply's fingerprint changed with its mail header")
	}
	seen := map[Fingerprint]string{plain: "plain", reply.Fingerprint(): "reply"}
	for _, body := range []string{`,"subject":"a"`, `,"subject":"b"`, `,"thread_id":"a"`, `,"importance":"high"`,
		`,"importance":"urgent"`, `,"ack_required":true`, `,"subject":"a","ack_required":true`, `,"meta":{"subject":"a"}`} {
		f := fp(body)
		if other, ok := seen[f]; ok {
			t.Errorf("%s has the fingerprint of %s", body, other)
		}
		seen[f] = body
	}
	if fp(`,"meta":{"b":1,"a":2},"subject":"s"`) != fp(`,"subject":"s","meta":{"a":2,"b":1}`) {
		t.Error("the order of meta keys changed the fingerprint")
	}
}

// TestSplitMail: the envelope leaves the meta it rode in, and one that is
// not a version 1 envelope, sealed or plain, is an error.
func TestSplitMail(t *testing.T) {
	for _, c := range []struct {
		name, meta, rest string
		env, bad         bool
	}{
		{"none", ``, ``, false, false},
		{"a meta without it", `{"a":1}`, `{"a":1}`, false, false},
		{"a meta that is not an object", `[1,"claudemesh_mail"]`, `[1,"claudemesh_mail"]`, false, false},
		{"sealed, alone", `{"claudemesh_mail":{"v":1,"nonce":"n","box":"b"}}`, ``, true, false},
		{"plain, beside a key", `{"a":1,"claudemesh_mail":{"v":1,"header":{"subject":"s"}}}`, `{"a":1}`, true, false},
		{"another version", `{"claudemesh_mail":{"v":2,"nonce":"n","box":"b"}}`, ``, false, true},
		{"sealed and plain", `{"claudemesh_mail":{"v":1,"nonce":"n","box":"b","header":{}}}`, ``, false, true},
		{"a nonce without a box", `{"claudemesh_mail":{"v":1,"nonce":"n"}}`, ``, false, true},
		{"empty", `{"claudemesh_mail":{"v":1}}`, ``, false, true},
		{"not an object", `{"claudemesh_mail":"x","b":2}`, `{"b":2}`, false, true},
	} {
		rest, env, err := SplitMail(json.RawMessage(c.meta))
		if string(rest) != c.rest || (env != nil) != c.env || errors.Is(err, ErrMailEnvelope) != c.bad {
			t.Errorf("%s: rest %s env %+v err %v", c.name, rest, env, err)
		}
	}
}

// TestParseMail: a header read from the mesh is checked as a request's is,
// and a receipt must say what it is about.
func TestParseMail(t *testing.T) {
	good := []string{
		`{"subject":"s","thread_id":"t","reply_to_id":"r","importance":"urgent","ack_required":true}`,
		`{"importance":"normal","new_field":[1]}`,
		`{"receipt":"ack","receipt_for":"c1","name":"cat"}`,
		`{"receipt":"held","receipt_for":"c1","until":"2026-11-28T10:00:00Z"}`,
		`{"receipt":"refused","receipt_for":"c1","reason":"no"}`,
	}
	for _, b := range good {
		if _, err := ParseMail([]byte(b)); err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
	bad := []string{
		`not json`, `{"subject":"a\u0000b"}`, `{"thread_id":"a b"}`, `{"importance":"loud"}`,
		`{"receipt":"ack"}`, `{"receipt":"yes","receipt_for":"c1"}`, `{"receipt_for":"c1"}`, `{"name":"x"}`,
		`{"receipt":"held","receipt_for":"c1","until":"tomorrow"}`,
		`{"receipt":"refused","receipt_for":"c1","reason":"` + strings.Repeat("r", 201) + `"}`,
		`{"subject":"` + strings.Repeat("s", maxHeaderBytes) + `"}`,
	}
	for _, b := range bad {
		if _, err := ParseMail([]byte(b)); !errors.Is(err, ErrMailEnvelope) {
			t.Errorf("%s: %v, want an ErrMailEnvelope", b, err)
		}
	}
}

// TestReceiptSend: a receipt's id depends on what it says and to whom,
// never on when; its text says what happened.
func TestReceiptSend(t *testing.T) {
	ack := Mail{Receipt: ReceiptAck, ReceiptFor: "c1", Name: "cat"}
	s1, id1 := ReceiptSend(ack, pk, "build")
	s2, id2 := ReceiptSend(ack, pk, "build")
	if id1 != id2 || s1.Fingerprint() != s2.Fingerprint() || !ValidClientMessageID(id1) || !strings.HasPrefix(id1, "rcpt-ack-") {
		t.Fatalf("two sends of one receipt: %s %s", id1, id2)
	}
	if !strings.Contains(string(s1.Body), "build") || s1.Destination.TargetSpec != pk || s1.Mail.Receipt != ReceiptAck {
		t.Fatalf("the receipt: %+v %q", s1, s1.Body)
	}
	for _, other := range []Mail{{Receipt: ReceiptAck, ReceiptFor: "c2"}, {Receipt: ReceiptHeld, ReceiptFor: "c1"},
		{Receipt: ReceiptRefused, ReceiptFor: "c1", Reason: ReasonBlockAll}} {
		if _, id := ReceiptSend(other, pk, ""); id == id1 {
			t.Errorf("%+v has the id of %+v", other, ack)
		}
	}
}

// TestSendFrameWithMailWithinBrokerLimit: the largest send a request may
// make, with the largest mail header sealed beside it (every field at its
// limit, of the characters its JSON escapes), is a frame the upstream
// broker takes.
func TestSendFrameWithMailWithinBrokerLimit(t *testing.T) {
	long := strings.Repeat("<", MaxIDLength)
	meta := `{"k":"` + strings.Repeat("<", (MaxMetaBytes-8)/6) + `"}`
	body := `{"to":"` + pk + `","message":"` + strings.Repeat("x", MaxMessageBytes) + `","client_message_id":"` + long +
		`","reply_to_id":"` + long + `","thread_id":"` + long + `","subject":"` + strings.Repeat(`\"`, MaxSubjectBytes) +
		`","importance":"urgent","ack_required":true,"priority":"next","meta":` + meta + `}`
	s, err := DecodeSend([]byte(body), "", false)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodedLen
	f := NewSendFrame(s, s.ClientMessageID, Fingerprint{}, strings.Repeat("A", b64(24)), strings.Repeat("A", b64(MaxMessageBytes+16)))
	env := &MailEnvelope{V: 1, Nonce: strings.Repeat("A", b64(24)), Box: strings.Repeat("A", b64(len(s.Header().JSON())+16))}
	if f.Meta, err = FrameMeta(s.Meta, env); err != nil {
		t.Fatal(err)
	}
	frame, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if len(frame) > MaxFrameBytes {
		t.Fatalf("the largest send frame with mail is %d bytes, over %d", len(frame), MaxFrameBytes)
	}
	t.Logf("largest send frame with mail: %d bytes of %d", len(frame), MaxFrameBytes)
}

// FuzzSplitMail: any meta splits without a panic; an envelope returned is
// a version 1 envelope, sealed or plain, and the rest no longer has it.
func FuzzSplitMail(f *testing.F) {
	f.Add([]byte(`{"claudemesh_mail":{"v":1,"nonce":"bm9uY2U=","box":"Ym94"},"a":1}`))
	f.Add([]byte(`{"claudemesh_mail":{"v":1,"header":{"subject":"s","ack_required":true}}}`))
	f.Add([]byte(`{"claudemesh_mail":{"v":1,"header":{"receipt":"ack","receipt_for":"c1"}},"claudemesh_mail":2}`))
	f.Add([]byte(`{"claudemesh_mail":null}`))
	f.Add([]byte(` { "claudemesh_mail" : {"v":1,"nonce":"n","box":"b"} } `))
	f.Add([]byte(`{"claudemesh_mail":{"v":1,"nonce":"n","box":"b","box":"c"}}`))
	f.Add([]byte(`{"claudemesh_mail":{"V":1,"nonce":"n","box":"b"}}`))
	f.Add([]byte(`{"claudemesh_mail":{"v":1.0,"nonce":"n","box":"b"}}`))
	f.Add([]byte(`{"claudemesh_mail":{"v":1,"nonce":"\u006e","box":"b"}}`))
	f.Add([]byte(`{"claudemesh_mail":{"v":2,"nonce":"n"}}x`))
	f.Fuzz(func(t *testing.T, meta []byte) {
		rest, env, err := SplitMail(meta)
		wantRest, wantEnv, wantErr := splitMailJSON(meta)
		if !bytes.Equal(rest, wantRest) || !reflect.DeepEqual(env, wantEnv) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("%q: %q %+v %v; through encoding/json alone %q %+v %v", meta, rest, env, err, wantRest, wantEnv, wantErr)
		}
		if err != nil && !errors.Is(err, ErrMailEnvelope) {
			return // the rest could not be re-encoded: nothing was taken
		}
		if env != nil && (env.V != 1 || (env.Header != nil) == (env.Nonce != "" || env.Box != "")) {
			t.Fatalf("envelope %+v from %q", env, meta)
		}
		if env == nil && err == nil && !bytes.Equal(rest, meta) {
			t.Fatalf("no envelope, yet the meta changed: %q → %q", meta, rest)
		}
		if env != nil {
			var obj map[string]json.RawMessage
			if json.Unmarshal(rest, &obj) == nil {
				if _, ok := obj[MailMetaKey]; ok {
					t.Fatalf("the rest still has the envelope: %q", rest)
				}
			}
		}
	})
}

// splitMailJSON is SplitMail through encoding/json alone, as it was before
// its one-pass reading of the usual shapes, which must answer the same.
func splitMailJSON(meta json.RawMessage) (json.RawMessage, *MailEnvelope, error) {
	if len(meta) == 0 || !bytes.Contains(meta, []byte(MailMetaKey)) {
		return meta, nil, nil
	}
	rest, raw, found, err := takeMail(meta)
	if !found {
		return meta, nil, err
	}
	env := &MailEnvelope{}
	if err := json.Unmarshal(raw, env); err != nil {
		return rest, nil, fmt.Errorf("%w: %v", ErrMailEnvelope, err)
	}
	if err := env.check(); err != nil {
		return rest, nil, err
	}
	return rest, env, nil
}

// FuzzParseMail: any bytes parse or fail without a panic, and a header
// that parses is a fixed point of its own encoding.
func FuzzParseMail(f *testing.F) {
	f.Add([]byte(`{"subject":"s <&>","thread_id":"t","reply_to_id":"r","importance":"high","ack_required":true}`))
	f.Add([]byte(`{"receipt":"held","receipt_for":"c1","until":"2026-11-28T10:00:00.5Z","name":"cat"}`))
	f.Add([]byte(`{"receipt":"refused","receipt_for":"c1","reason":"r","x":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMail(b)
		if err != nil {
			if !errors.Is(err, ErrMailEnvelope) {
				t.Fatalf("%q: %v is not an ErrMailEnvelope", b, err)
			}
			return
		}
		again, err := ParseMail(m.JSON())
		if err != nil || *again != *m {
			t.Fatalf("%q: %+v re-read as %+v (%v)", b, m, again, err)
		}
	})
}

// BenchmarkParseMail: a header as a send with a subject, a thread and an
// acknowledgement seals it, read on receipt.
//
//	go test -run='^$' -bench=BenchmarkParseMail ./messages/
func BenchmarkParseMail(b *testing.B) {
	h := []byte(`{"subject":"status","thread_id":"bench-thread","ack_required":true}`)
	for b.Loop() {
		if _, err := ParseMail(h); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSplitMail: the meta of a push of mail as our daemons send it,
// the sealed envelope alone, taken apart on receipt.
//
//	go test -run='^$' -bench=BenchmarkSplitMail ./messages/
func BenchmarkSplitMail(b *testing.B) {
	meta := json.RawMessage(`{"claudemesh_mail":{"v":1,"nonce":"` + strings.Repeat("C", 32) + `","box":"` +
		strings.Repeat("D", 160) + `"}}`)
	for b.Loop() {
		if _, env, err := SplitMail(meta); err != nil || env == nil {
			b.Fatal(env, err)
		}
	}
}

// FuzzCanonicalMailMeta: the fingerprint's meta of a header alone, written
// directly, is byte for byte what the general path (the header's JSON
// merged into an empty meta, then RFC 8785) makes of it, so that a
// request's fingerprint is the same before and after.
func FuzzCanonicalMailMeta(f *testing.F) {
	f.Add("status", "bench-thread", "", "", true, "", "", "", "", "")
	f.Add("a \"q\" \\ <&> \u2028 é \x7f \x01\b\t\n\f\r", "t", "r", "high", false, "", "", "", "", "")
	f.Add("", "", "", "", false, "ack", "c1", "2026-11-28T10:00:00.5Z", "why", "cat")
	f.Add("\xff", "", "", "", false, "", "", "", "", "")
	f.Fuzz(func(t *testing.T, subject, thread, reply, importance string, ack bool, receipt, receiptFor, until, reason, name string) {
		m := &Mail{Subject: subject, ThreadID: thread, ReplyToID: reply, Importance: importance, AckRequired: ack,
			Receipt: receipt, ReceiptFor: receiptFor, Until: until, Reason: reason, Name: name}
		got, ok := m.canonicalMeta()
		if !ok {
			return
		}
		merged, err := mergeMeta(nil, m.JSON())
		if err != nil {
			t.Fatal(err)
		}
		want, err := jcs.Transform(merged)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%+v: direct %s, general %s (%v)", m, got, want, err)
		}
	})
}

// BenchmarkFingerprintMeta: the fingerprint's meta of a mail header alone,
// as every send with a subject, thread or acknowledgement computes it.
//
//	go test -run='^$' -bench=BenchmarkFingerprintMeta ./messages/
func BenchmarkFingerprintMeta(b *testing.B) {
	m := &Mail{Subject: "status", ThreadID: "bench-thread", AckRequired: true}
	for b.Loop() {
		fingerprintMeta(nil, m)
	}
}

// FuzzFrameMeta: the meta of a frame whose request had none, written
// directly, is what merging the envelope into an empty meta makes.
func FuzzFrameMeta(f *testing.F) {
	f.Add("bm9uY2U=", "Ym94", "", false)
	f.Add("", "", "<&> \u2028 \xff \"", true)
	f.Fuzz(func(t *testing.T, nonce, box, subject string, plain bool) {
		env := &MailEnvelope{V: 1, Nonce: nonce, Box: box}
		if plain {
			env = &MailEnvelope{V: 1, Header: &Mail{Subject: subject, AckRequired: true}}
		}
		got, err := FrameMeta(nil, env)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(env)
		if want, err := mergeMeta(nil, raw); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%+v: direct %s, merged %s (%v)", env, got, want, err)
		}
	})
}
