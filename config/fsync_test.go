package config

import "testing"

func TestParseFsyncMode(t *testing.T) {
	for _, m := range []FsyncMode{FsyncStrict, FsyncBatched, FsyncOff} {
		if got, err := ParseFsyncMode(m.String()); err != nil || got != m {
			t.Errorf("ParseFsyncMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	for _, bad := range []string{"", "batched", "STRICT", "full", "FsyncMode(3)"} {
		if _, err := ParseFsyncMode(bad); err == nil {
			t.Errorf("ParseFsyncMode(%q) accepted", bad)
		}
	}
	if s := FsyncMode(7).String(); s != "FsyncMode(7)" {
		t.Errorf("an unknown mode prints %q", s)
	}
	var none *FsyncPolicy
	if none.Mode() != FsyncStrict {
		t.Error("a nil policy is not strict")
	}
}
