package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestRecipientKey: a list send's ids are <key>/<recipient> while that is
// an id; a recipient that is not printable ASCII, or too long, and a key
// too long for both, are hashed; each id is valid, the same for the same
// key and recipient, and different for two recipients.
func TestRecipientKey(t *testing.T) {
	long := strings.Repeat("k", messages.MaxIDLength)
	for _, c := range []struct{ key, to, want string }{
		{"c-1", "bob", "c-1/bob"},
		{"c-1", "#builds", "c-1/#builds"},
		{"c-1", "*", "c-1/*"},
		{"c-1", "Zoë", "c-1/" + shortHash("Zoë")},
		{"c-1", "bob smith", "c-1/" + shortHash("bob smith")},
		{"c-1", strings.Repeat("b", 65), "c-1/" + shortHash(strings.Repeat("b", 65))},
		{long, "bob", long[:messages.MaxIDLength-1-3-17] + "~" + shortHash(long) + "/bob"},
	} {
		got := recipientKey(c.key, c.to)
		if got != c.want || !messages.ValidClientMessageID(got) {
			t.Errorf("recipientKey(%.20q, %q) = %q (valid %v), want %q", c.key, c.to, got, messages.ValidClientMessageID(got), c.want)
		}
	}
	a, b := recipientKey(long, strings.Repeat("a", 64)), recipientKey(long, strings.Repeat("b", 64))
	if a == b || !messages.ValidClientMessageID(a) || !messages.ValidClientMessageID(b) {
		t.Errorf("two 64-byte recipients of a 128-byte key: %q and %q", a, b)
	}
}

// TestRecipientsJSON: to decodes from a string or a list, and encodes
// back as it came.
func TestRecipientsJSON(t *testing.T) {
	for _, raw := range []string{`"bob"`, `["bob"]`, `["bob","#builds"]`, `[]`} {
		var r recipients
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if b, err := json.Marshal(r); err != nil || string(b) != raw {
			t.Errorf("%s: encoded back as %s %v", raw, b, err)
		}
	}
	var r recipients
	if err := json.Unmarshal([]byte(`7`), &r); err == nil {
		t.Error("to 7: no error")
	}
}
