package config

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadFile: whatever config.toml holds, LoadFile either answers an
// error that names the file, or a File that passes validation. It never
// panics.
func FuzzLoadFile(f *testing.F) {
	for _, seed := range []string{
		"",
		"[daemon]\nlog_level = \"debug\"\n[ipc]\ntcp_enabled = false\nhttp_bind = \"::1\"\nhttp_port = 0\norigin_allowlist = [\"http://localhost:3000\"]\n[log]\nmax_size_mb = 1\nmax_age_days = 1\n[clone]\npolicy = \"warn\"\n",
		"[ipc]\nhttp_port = 70000\n",
		"[ipc]\nhttp_bind = \"0.0.0.0\"\n",
		"[log]\nmax_size_mb = \"big\"\n",
		"[daemon]\nunknown = 1\n",
		"[outbox]\nfsync_mode = \"batched_50ms\"\nmax_size_mb = 1\n",
		"[outbox]\nfsync_mode = 1\n",
		"[daemon\n",
	} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "config.toml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		file, err := LoadFile(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := file.validate(path); err != nil {
			t.Fatalf("LoadFile answered a File that fails validation: %v", err)
		}
	})
}

// FuzzAddMembership: whatever config.json holds, AddMembership either
// appends the mesh after the ones it returns as before, or refuses with the
// file left byte for byte as it was. It never panics.
func FuzzAddMembership(f *testing.F) {
	for _, seed := range []string{
		"",
		`{}`,
		`{"meshes":null,"apiKey":"k"}`,
		`{"meshes":[{"meshId":"m0","memberId":"x","slug":"local","name":"local","pubkey":"aa","secretKey":"bb","brokerUrl":"","extra":[1]}],"big":12345678901234567890}`,
		`{"meshes":[{"meshId":"mesh-f","slug":"other","pubkey":"aa","secretKey":"bb"}]}`,
		`{"meshes":{"slug":"x"}}`,
		`{"meshes":[1]}`,
		`[]`,
		`{`,
	} {
		f.Add([]byte(seed))
	}
	m, err := NewMembership("fuzz", "ws://127.0.0.1:1/ws")
	if err != nil {
		f.Fatal(err)
	}
	m.MeshID = "mesh-f"
	f.Fuzz(func(t *testing.T, data []byte) {
		paths := Paths{ConfigDir: t.TempDir()}
		if err := os.WriteFile(paths.ConfigFile(), data, 0o600); err != nil {
			t.Fatal(err)
		}
		before, err := paths.AddMembership(m)
		if err != nil {
			if now, _ := os.ReadFile(paths.ConfigFile()); !bytes.Equal(now, data) {
				t.Fatalf("a refused add (%v) changed config.json to %q", err, now)
			}
			return
		}
		doc, err := paths.readConfigDoc()
		if err != nil {
			t.Fatalf("AddMembership wrote a file it cannot read back: %v", err)
		}
		var meshes []Membership
		if err := json.Unmarshal(doc["meshes"], &meshes); err != nil || len(meshes) != len(before)+1 {
			t.Fatalf("meshes after the add: %d, %v; want %d", len(meshes), err, len(before)+1)
		}
		if got := meshes[len(meshes)-1]; got != m {
			t.Fatalf("last mesh %+v, want %+v", got, m)
		}
	})
}
