package mcpserver

import "testing"

// TestResourceOf: the URIs of the server's resources, ours and Agent
// Mail's, name their kind (and thread); anything else names none.
func TestResourceOf(t *testing.T) {
	for _, c := range []struct{ uri, kind, thread string }{
		{"inbox://messages", kindMessages, ""},
		{"inbox://peers", kindPeers, ""},
		{"inbox://reservations", kindReservations, ""},
		{"inbox://threads/01JABC", kindThread, "01JABC"},
		{"inbox://threads/a%2Fb", kindThread, "a/b"},
		{"resource://inbox/BlueLake", kindMessages, ""},
		{"resource://inbox/BlueLake?project=x&limit=5", kindMessages, ""},
		{"resource://thread/T-1", kindThread, "T-1"},
		{"inbox://threads/", "", ""},
		{"inbox://messages/extra", "", ""},
		{"inbox://messages?limit=5", "", ""},
		{"inbox://nothing", "", ""},
		{"resource://inbox/", "", ""},
		{"file:///etc/passwd", "", ""},
		{"%zz", "", ""},
	} {
		if kind, thread := resourceOf(c.uri); kind != c.kind || thread != c.thread {
			t.Errorf("resourceOf(%q) = %q, %q; want %q, %q", c.uri, kind, thread, c.kind, c.thread)
		}
	}
}
