package messages

import "testing"

// TestReceiptDescribe: each kind of receipt in words, naming the
// recipient, or its key when it has no name.
func TestReceiptDescribe(t *testing.T) {
	for _, c := range []struct {
		r    Receipt
		want string
	}{
		{Receipt{Kind: ReceiptHeld, Name: "cat", Until: "2026-12-06T08:49:35.301Z"},
			"held by cat as a contact request until 2026-12-06T08:49:35.301Z"},
		{Receipt{Kind: ReceiptRefused, Name: "cat", Reason: ReasonBlockAll}, "refused by cat: " + ReasonBlockAll},
		{Receipt{Kind: ReceiptRefused, Pubkey: "ab12"}, "refused by ab12"},
		{Receipt{Kind: ReceiptAccepted, Name: "cat"}, "accepted by cat as a contact"},
		{Receipt{Kind: "later", Name: "cat"}, "later by cat"},
	} {
		if got := c.r.Describe(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.r, got, c.want)
		}
	}
}
