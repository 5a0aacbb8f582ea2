package main

import (
	"encoding/json"
	"testing"

	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// TestWithDaemon: "daemon" becomes the first member of any object, empty
// or not, whatever space surrounds it; what is not an object, or no daemon,
// leaves the bytes as they were.
func TestWithDaemon(t *testing.T) {
	up := &ipc.Daemon{Kind: ipc.DaemonUpstream, Version: "1.37.0"}
	ours := &ipc.Daemon{Kind: ipc.DaemonOurs, Version: "0.9.0", PID: 7}
	cases := []struct {
		in   string
		d    *ipc.Daemon
		want string
	}{
		{`{"a":1}`, up, `{"daemon":{"kind":"upstream","version":"1.37.0"},"a":1}`},
		{" {\n\"a\" : [1]}\n", ours, `{"daemon":{"kind":"claudemesh-go","version":"0.9.0","pid":7},` + "\n\"a\" : [1]}"},
		{`{}`, up, `{"daemon":{"kind":"upstream","version":"1.37.0"}}`},
		{`{ }`, up, `{"daemon":{"kind":"upstream","version":"1.37.0"} }`},
		{`[1,2]`, up, `[1,2]`},
		{`{"a":1}`, nil, `{"a":1}`},
	}
	for _, tc := range cases {
		got := string(withDaemon([]byte(tc.in), tc.d))
		if got != tc.want {
			t.Errorf("withDaemon(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if tc.d != nil && tc.in[0] != '[' && !json.Valid([]byte(got)) {
			t.Errorf("withDaemon(%q) = %q is not JSON", tc.in, got)
		}
	}
}
