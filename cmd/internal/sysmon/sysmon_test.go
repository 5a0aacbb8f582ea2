package sysmon

import "testing"

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
		got, added := WithSetting(c.in)
		if got != c.want || added != c.added {
			t.Errorf("WithSetting(%q) = %q, %v; want %q, %v", c.in, got, added, c.want, c.added)
		}
	}
}
