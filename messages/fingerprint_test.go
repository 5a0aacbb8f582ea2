package messages

import (
	"encoding/json"
	"os"
	"testing"
)

type fingerprintVector struct {
	EnvelopeVersion    string          `json:"envelope_version"`
	DestinationKind    string          `json:"destination_kind"`
	DestinationRef     string          `json:"destination_ref"`
	ReplyToID          string          `json:"reply_to_id"`
	Priority           string          `json:"priority"`
	Meta               json.RawMessage `json:"meta"`
	Body               string          `json:"body"`
	MetaCanonicalJSON  string          `json:"meta_canonical_json"`
	RequestFingerprint string          `json:"request_fingerprint_hex"`
}

// TestFingerprintVectors reproduces every vector of spec §4.3, both from the
// vector's fields and through the request decoder.
func TestFingerprintVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/fingerprint-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []fingerprintVector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for i, v := range file.Vectors {
		if v.EnvelopeVersion != envelopeVersion1 {
			t.Fatalf("vector %d: envelope version %q unsupported", i, v.EnvelopeVersion)
		}
		meta, err := CanonicalMeta(v.Meta)
		if err != nil {
			t.Fatalf("vector %d: meta: %v", i, err)
		}
		if string(meta) != v.MetaCanonicalJSON {
			t.Errorf("vector %d: canonical meta %q, want %q", i, meta, v.MetaCanonicalJSON)
		}
		s := &Send{Destination: Destination{Kind: v.DestinationKind, Ref: v.DestinationRef},
			ReplyToID: v.ReplyToID, Priority: v.Priority, Meta: meta, Body: []byte(v.Body)}
		if got := s.Fingerprint().Hex(); got != v.RequestFingerprint {
			t.Errorf("vector %d: fingerprint %s, want %s", i, got, v.RequestFingerprint)
		}

		to := v.DestinationRef
		if v.DestinationKind == KindTopic {
			to = "#" + to
		}
		body, _ := json.Marshal(map[string]any{"to": to, "message": v.Body, "priority": v.Priority, "meta": v.Meta})
		decoded, err := DecodeSend(body, "", false)
		if err != nil {
			t.Fatalf("vector %d: decode: %v", i, err)
		}
		if got := decoded.Fingerprint().Hex(); got != v.RequestFingerprint {
			t.Errorf("vector %d via DecodeSend: fingerprint %s, want %s", i, got, v.RequestFingerprint)
		}
	}
}

func TestFingerprintPrefix(t *testing.T) {
	var f Fingerprint
	for i := range f {
		f[i] = byte(i)
	}
	if got, want := f.Prefix(), "0001020304050607"; got != want {
		t.Errorf("Prefix() = %s, want %s", got, want)
	}
}

// TestFingerprintSensitivity checks that every field the spec lists changes
// the fingerprint, and that the forms the spec equates do not.
func TestFingerprintSensitivity(t *testing.T) {
	base := `{"to":"#alerts","message":"hello","priority":"next","meta":{"a":1,"b":[1,2]}}`
	fp := func(body string) Fingerprint {
		t.Helper()
		s, err := DecodeSend([]byte(body), "", false)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return s.Fingerprint()
	}
	ref := fp(base)
	differs := []string{
		`{"to":"#alert","message":"hello","priority":"next","meta":{"a":1,"b":[1,2]}}`,
		`{"to":"@alerts","message":"hello","priority":"next","meta":{"a":1,"b":[1,2]}}`,
		`{"to":"#alerts","message":"hello!","priority":"next","meta":{"a":1,"b":[1,2]}}`,
		`{"to":"#alerts","message":"hello","priority":"now","meta":{"a":1,"b":[1,2]}}`,
		`{"to":"#alerts","message":"hello","priority":"next","meta":{"a":2,"b":[1,2]}}`,
		`{"to":"#alerts","message":"hello","priority":"next","meta":{"a":1,"b":[1,2]},"reply_to_id":"m1"}`,
		`{"to":"#alerts","message":"hello","priority":"next"}`,
	}
	for _, body := range differs {
		if fp(body) == ref {
			t.Errorf("%s shares the fingerprint of %s", body, base)
		}
	}
	same := []string{
		`{"meta":{"b":[1,2],"a":1.0},"message":"hello","to":"#alerts"}`,
		`{"to":"#alerts","message":"hello","priority":"next","meta":{"a":1,"b":[1,2]},"client_message_id":"other"}`,
		`{"to":"#alerts","message":"hello","priority":"next","meta":{"a":1,"b":[1,2]},"mesh":"local"}`,
	}
	for _, body := range same {
		if fp(body) != ref {
			t.Errorf("%s should share the fingerprint of %s", body, base)
		}
	}
	empty := fp(`{"to":"*","message":"x"}`)
	for _, body := range []string{`{"to":"*","message":"x","meta":null}`, `{"to":"*","message":"x","meta":{}}`} {
		if fp(body) != empty {
			t.Errorf("%s: absent, null and {} meta must fingerprint alike", body)
		}
	}
	upper := fp(`{"to":"3B6A27BCCEB6A42D62A3A8D02A6F0D73653215771DE243A63AC048A18B59DA29","message":"x"}`)
	lower := fp(`{"to":"3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29","message":"x"}`)
	if upper != lower {
		t.Error("a pubkey's hex case must not change the fingerprint")
	}
}
