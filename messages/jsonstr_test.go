package messages

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzAppendJSONString: the hand-written string encoding is encoding/json's,
// with and without HTML escaping.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "01J0000000000000000000000A", `a"b\c`, "\x00\x1f\b\f\n\r\t\x7f", "é\u2028\u2029", "\xff\xfe", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, html := range []bool{false, true} {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(html)
			if err := enc.Encode(s); err != nil {
				t.Fatal(err)
			}
			want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
			if got := AppendJSONString(nil, s, html); !bytes.Equal(got, want) {
				t.Fatalf("AppendJSONString(%q, %v) = %s, want %s", s, html, got, want)
			}
		}
	})
}

// FuzzSendFrameMarshal: the frame's own encoding is json.Marshal's, and a
// stored frame given first_send (WithFirstSend) is the frame marshalled
// with it.
func FuzzSendFrameMarshal(f *testing.F) {
	f.Add("01J0000000000000000000000A", "#builds", "now", "bm9uY2U=", "Y2lwaGVy", "", []byte(nil), false)
	f.Add(`q"<&>`, "\u2028", "", "", "", "r", []byte(`{"a": "<b>"}`), true)
	f.Add("i", "t", "next", "n", "c", "", []byte(` { "claudemesh_mail" : {"v":1, "box":"b"} } `), false)
	f.Add("i", "t", "next", "n", "c", "", []byte("{\"k\":\"\u2028\xff\"}"), false)
	f.Fuzz(func(t *testing.T, id, target, priority, nonce, ciphertext, replyTo string, meta []byte, first bool) {
		fr := &SendFrame{Type: "send", ID: id, ClientMessageID: id, RequestFingerprint: "00ff", TargetSpec: target,
			Priority: priority, Nonce: nonce, Ciphertext: ciphertext, ReplyToID: replyTo, FirstSend: first}
		if json.Valid(meta) {
			fr.Meta = meta
		}
		want, werr := json.Marshal(fr)
		got, err := fr.Marshal()
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("Marshal = %s %v, json.Marshal = %s %v", got, err, want, werr)
		}
		if first || err != nil {
			return
		}
		fr.FirstSend = true
		want, _ = json.Marshal(fr)
		if hinted := WithFirstSend(got); !bytes.Equal(hinted, want) {
			t.Fatalf("WithFirstSend = %s, want %s", hinted, want)
		}
	})
}

// FuzzInboxItemMarshal: the item's own encoding is json.Marshal's.
func FuzzInboxItemMarshal(f *testing.F) {
	f.Add("01J0000000000000000000000A", "c1", "", "dm", "", "hello <b> & \u2028", true, []byte(nil), "", "", false)
	f.Add("i", "broker:x", "b1", "topic", "builds", "", false, []byte(`{"decrypt_error":"x"}`), "r", "", false)
	f.Add("i", "c2", "b2", "dm", "", "text", true, []byte(nil), "c1", "Re: <the build>", true)
	f.Fuzz(func(t *testing.T, id, cid, bmid, kind, topic, body string, hasBody bool, meta []byte, replyTo, subject string, mail bool) {
		it := &InboxItem{ID: id, ClientMessageID: cid, BrokerMessageID: bmid, Mesh: "m", Kind: kind, Topic: NullString(topic),
			SenderPubkey: "ab", SenderName: "alice", ReceivedAt: "2026-11-25T00:00:00Z", ReceivedAtMs: 5, ReplyToID: NullString(replyTo),
			Subject: subject, ThreadID: replyTo}
		if hasBody {
			it.Body = &body
		}
		if mail {
			it.Importance, it.AckRequired, it.AckedAt, it.HeldUntil = "urgent", true, &topic, &body
			it.Priority, it.SentAt = kind, subject
		}
		if json.Valid(meta) {
			it.Meta = meta
		}
		want, werr := json.Marshal(it)
		got, err := it.Marshal()
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("Marshal = %s %v, json.Marshal = %s %v", got, err, want, werr)
		}
	})
}

// TestNullStringJSON: a NullString encodes as a string field does, with
// and without HTML escaping, but as null when empty; it decodes from a
// string or from null.
func TestNullStringJSON(t *testing.T) {
	type field struct {
		S NullString `json:"s"`
	}
	type plain struct {
		S string `json:"s"`
	}
	for _, s := range []string{"", "builds", "<a & b>\u2028", "\xff"} {
		for _, html := range []bool{false, true} {
			var got, want bytes.Buffer
			enc, ref := json.NewEncoder(&got), json.NewEncoder(&want)
			enc.SetEscapeHTML(html)
			ref.SetEscapeHTML(html)
			if err := enc.Encode(field{NullString(s)}); err != nil {
				t.Fatal(err)
			}
			ref.Encode(plain{s})
			if s == "" {
				want.Reset()
				want.WriteString(`{"s":null}` + "\n")
			}
			if got.String() != want.String() {
				t.Errorf("%q (escape HTML %v): %s, want %s", s, html, got.Bytes(), want.Bytes())
			}
		}
	}
	for in, want := range map[string]NullString{`{"s":null}`: "", `{"s":"x"}`: "x", `{}`: ""} {
		var f field
		if err := json.Unmarshal([]byte(in), &f); err != nil || f.S != want {
			t.Errorf("decode %s: %q %v, want %q", in, f.S, err, want)
		}
	}
}

// BenchmarkAppendJSONString: a sealed body's base64 as frames and inbox
// items carry it, which needs no escape.
//
//	go test -run='^$' -bench=BenchmarkAppendJSONString ./messages/
func BenchmarkAppendJSONString(b *testing.B) {
	s := strings.Repeat("Ym9keQ==", 43)
	buf := make([]byte, 0, 512)
	for b.Loop() {
		buf = AppendJSONString(buf[:0], s, true)
	}
}

// BenchmarkSendFrameMarshal: a DM's send frame without meta as the
// dispatcher encodes it (its 344-byte ciphertext the longest string).
//
//	go test -run='^$' -bench=BenchmarkSendFrameMarshal ./messages/
func BenchmarkSendFrameMarshal(b *testing.B) {
	f := &SendFrame{Type: TypeSend, ID: "01JD0000000000000000000000", ClientMessageID: "01JD0000000000000000000000",
		RequestFingerprint: strings.Repeat("ab", 32), TargetSpec: strings.Repeat("cd", 32), Priority: "next",
		Nonce: strings.Repeat("A", 32), Ciphertext: strings.Repeat("B", 344)}
	for b.Loop() {
		if _, err := f.Marshal(); err != nil {
			b.Fatal(err)
		}
	}
}
