package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestSweepSessionKeys: the first sweep only marks when the sweeps began;
// once that is older than the cutoff, a sweep removes the key files of the
// sessions keep does not name that were last used before the cutoff, and
// leaves what it did not write; TouchSessionKey makes a key used again.
func TestSweepSessionKeys(t *testing.T) {
	p := Paths{ConfigDir: t.TempDir()}
	now := time.Now()
	old, cutoff := now.Add(-2*time.Hour), now.Add(-time.Hour)
	files := map[string]string{
		"unused":     p.SessionKeyFile("demo", "unused"),
		"registered": p.SessionKeyFile("demo", "registered"),
		"recent":     p.SessionKeyFile("demo", "recent"),
		"touched":    p.SessionKeyFile("other", "touched"),
		"temp":       filepath.Join(p.ConfigDir, "sessions", "demo", ".unused.json.123.tmp"),
		"foreign":    filepath.Join(p.ConfigDir, "sessions", "demo", "notes.txt"),
	}
	for name, f := range files {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		if name != "recent" {
			if err := os.Chtimes(f, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	keep := func(mesh, id string) bool { return mesh == "demo" && id == "registered" }
	if removed, err := p.SweepSessionKeys(cutoff, keep); err != nil || len(removed) != 0 {
		t.Fatalf("the first sweep removed %v, %v; want nothing", removed, err)
	}
	if removed, err := p.SweepSessionKeys(cutoff, keep); err != nil || len(removed) != 0 {
		t.Fatalf("a sweep begun after the cutoff removed %v, %v; want nothing", removed, err)
	}
	if err := os.Chtimes(p.SessionKeysSweptSince(), old, old); err != nil {
		t.Fatal(err)
	}
	if err := p.TouchSessionKey("other", "touched", now); err != nil {
		t.Fatal(err)
	}
	if err := p.TouchSessionKey("demo", "never-registered", now); err != nil {
		t.Errorf("touching a key that has no file: %v", err)
	}
	removed, err := p.SweepSessionKeys(cutoff, keep)
	if err != nil || !slices.Equal(removed, []string{files["unused"]}) {
		t.Fatalf("removed %v, %v; want only %s", removed, err, files["unused"])
	}
	for name, f := range files {
		if _, err := os.Stat(f); (err == nil) == (name == "unused") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
