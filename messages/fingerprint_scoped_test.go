package messages

import "testing"

// TestFingerprintScoped pins the form of the sender-scoped fingerprint
// (SHA-256 of "2" 0x00 sender 0x00 and the §4.3 fingerprint's raw bytes;
// the expected values were computed apart, with Python's hashlib), on the
// first §4.3 vector: it is stored in outbox rows and sent to brokers, so
// it must never drift.
func TestFingerprintScoped(t *testing.T) {
	var spec Fingerprint
	s := &Send{Destination: Destination{Kind: KindDM, Ref: "3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29"},
		Priority: "next", Body: []byte("hello")}
	if spec = s.Fingerprint(); spec.Hex() != "feb03d97ec330e981ca079fb9285e2e1ff360d771e04055e193357c5ec71d890" {
		t.Fatalf("§4.3 vector 1: %s", spec.Hex())
	}
	for sender, want := range map[string]string{
		"local":        "063d111f1cadd42a4a804bb95591f3085e13fc9abe11a35a11a087b268e3e167",
		"local/sess-a": "6d9cb881f551983d0027af983071c2386a8c71dbe953daebd9190f238b2a2fac",
	} {
		if got := spec.Scoped(sender).Hex(); got != want {
			t.Errorf("Scoped(%q) = %s, want %s", sender, got, want)
		}
	}
	if spec.Scoped("a") == spec.Scoped("b") || spec.Scoped("a") == spec {
		t.Error("the scoped fingerprint must depend on the sender")
	}
}
