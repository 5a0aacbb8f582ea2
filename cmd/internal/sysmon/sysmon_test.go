package sysmon

import (
	"strings"
	"testing"
)

func TestWithSetting(t *testing.T) {
	for _, c := range []struct {
		in, want string
		added    bool
	}{
		{"", Setting, true},
		{"  ", Setting, true},
		{"madvdontneed=1", "madvdontneed=1," + Setting, true},
		{"madvdontneed=1,gctrace=1", "madvdontneed=1,gctrace=1," + Setting, true},
		{"schedtrace=0", "schedtrace=0", false},
		{"gctrace=1, schedtrace=1000", "gctrace=1, schedtrace=1000", false},
		{"schedtrace", "schedtrace", false},
		{"scheddetail=1", "scheddetail=1," + Setting, true},
	} {
		got, added := withSetting(c.in)
		if got != c.want || added != c.added {
			t.Errorf("withSetting(%q) = %q, %v; want %q, %v", c.in, got, added, c.want, c.added)
		}
	}
}

// FuzzWithSetting: whatever GODEBUG holds, the answer names schedtrace
// exactly once more than it did when it named none, and keeps every
// entry it had, in order.
func FuzzWithSetting(f *testing.F) {
	for _, s := range []string{"", "madvdontneed=1", "schedtrace=0", "a=1,,b=2", " schedtrace = 5", "schedtracex=1", ",", "gctrace=1,schedtrace"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, godebug string) {
		got, added := withSetting(godebug)
		if !added {
			if got != godebug {
				t.Fatalf("withSetting(%q) changed it to %q without adding", godebug, got)
			}
			return
		}
		if strings.TrimSpace(godebug) == "" {
			if got != Setting {
				t.Fatalf("withSetting(%q) = %q, want %q", godebug, got, Setting)
			}
			return
		}
		if got != godebug+","+Setting {
			t.Fatalf("withSetting(%q) = %q, want it with %q appended", godebug, got, Setting)
		}
		again, addedAgain := withSetting(got)
		if addedAgain || again != got {
			t.Fatalf("withSetting(%q) added again: %q", got, again)
		}
	})
}
