package hookcmd

import (
	"strings"
	"testing"
)

// TestRunDeclines: what is not a receiver's command line is left to the
// caller (kong's parser, or claudemesh-hook's usage), and receives nothing.
func TestRunDeclines(t *testing.T) {
	for _, args := range [][]string{{}, {"install"}, {"uninstall", "--dry-run"}, {"--help"}, {"Stop", "-h"},
		{"Stop", "--agent", "gemini"}, {"a", "b", "c"}, {"receive", "Stop"}} {
		var stdout, stderr strings.Builder
		if Run(args, strings.NewReader("{}"), &stdout, &stderr) {
			t.Errorf("%q ran the receiver", args)
		}
		if stdout.Len()+stderr.Len() > 0 {
			t.Errorf("%q wrote %q %q", args, stdout.String(), stderr.String())
		}
	}
}
