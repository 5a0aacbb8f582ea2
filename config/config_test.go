package config

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testPaths(t *testing.T) Paths {
	dir := t.TempDir()
	return Paths{DaemonDir: filepath.Join(dir, "daemon"), ConfigDir: filepath.Join(dir, "cfg")}
}

func TestLocalToken(t *testing.T) {
	p := testPaths(t)
	if err := p.EnsureDaemonDir(); err != nil {
		t.Fatal(err)
	}
	tok, err := p.EnsureLocalToken()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) != 32 || len(tok) != 43 {
		t.Fatalf("token %q: %d bytes (%v), want 32 bytes unpadded base64url", tok, len(raw), err)
	}
	fi, _ := os.Stat(p.TokenFile())
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(p.TokenFile()); string(b) != tok+"\n" {
		t.Fatalf("file %q", b)
	}
	again, err := p.EnsureLocalToken()
	if err != nil || again != tok {
		t.Fatal("an existing token must be kept")
	}
	os.WriteFile(p.TokenFile(), []byte("\n"), 0o600)
	if _, err := p.EnsureLocalToken(); err == nil {
		t.Fatal("an empty token file must be an error, not silently replaced")
	}
}

func TestDaemonDirMode(t *testing.T) {
	p := testPaths(t)
	os.MkdirAll(p.DaemonDir, 0o755)
	if err := p.EnsureDaemonDir(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p.DaemonDir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v, want 0700", fi.Mode().Perm())
	}
}

func TestEnsureMembershipsCreatesLocalAndKeepsOtherKeys(t *testing.T) {
	p := testPaths(t)
	os.MkdirAll(p.ConfigDir, 0o700)
	os.WriteFile(p.ConfigFile(), []byte(`{"displayName":"me","meshes":[]}`), 0o600)
	meshes, err := p.EnsureMemberships()
	if err != nil || len(meshes) != 1 || meshes[0].Slug != LocalMeshSlug {
		t.Fatalf("%v %v", meshes, err)
	}
	m := meshes[0]
	if len(m.Pubkey) != 64 || len(m.SecretKey) != 128 || !strings.HasSuffix(m.SecretKey, m.Pubkey) {
		t.Fatalf("key material has the wrong shape: pubkey %d, secret %d", len(m.Pubkey), len(m.SecretKey))
	}
	var doc map[string]json.RawMessage
	b, _ := os.ReadFile(p.ConfigFile())
	json.Unmarshal(b, &doc)
	if string(doc["displayName"]) != `"me"` {
		t.Fatalf("other keys lost: %s", b)
	}
	if fi, _ := os.Stat(p.ConfigFile()); fi.Mode().Perm() != 0o600 {
		t.Fatalf("config.json mode %v", fi.Mode().Perm())
	}
	again, err := p.EnsureMemberships()
	if err != nil || len(again) != 1 || again[0].Pubkey != m.Pubkey {
		t.Fatal("a second start must reuse the membership")
	}
}

func TestLoadMembershipsRejectsBadFiles(t *testing.T) {
	for name, body := range map[string]string{
		"not json":      `{"meshes":`,
		"meshes object": `{"meshes":{}}`,
		"missing key":   `{"meshes":[{"slug":"a","pubkey":"ab"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			p := testPaths(t)
			os.MkdirAll(p.ConfigDir, 0o700)
			os.WriteFile(p.ConfigFile(), []byte(body), 0o600)
			if _, err := p.EnsureMemberships(); err == nil {
				t.Fatal("want an error")
			}
			if b, _ := os.ReadFile(p.ConfigFile()); string(b) != body {
				t.Fatal("a bad config.json must be left as it is")
			}
		})
	}
}

func TestPidLock(t *testing.T) {
	p := testPaths(t)
	p.EnsureDaemonDir()
	os.WriteFile(p.PidFile(), []byte("999999\n"), 0o600) // left by a killed daemon
	l, err := p.LockPidFile()
	if err != nil {
		t.Fatalf("a stale pid file must not block: %v", err)
	}
	if _, err := p.LockPidFile(); !errors.Is(err, ErrAlreadyRunning) || !strings.Contains(err.Error(), "pid ") {
		t.Fatalf("second lock: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.PidFile()); !os.IsNotExist(err) {
		t.Fatal("release must remove the pid file")
	}
	l2, err := p.LockPidFile()
	if err != nil {
		t.Fatal(err)
	}
	l2.Release()
}
