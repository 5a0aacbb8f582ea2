package config

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func testMembership(t *testing.T, meshID, slug string) Membership {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return Membership{MeshID: meshID, MemberID: "member-" + slug, Slug: slug, Name: slug,
		Pubkey: hex.EncodeToString(pub), SecretKey: hex.EncodeToString(priv), BrokerURL: "ws://127.0.0.1:7900/ws",
		JoinedAt: "2026-03-01T12:00:00Z"}
}

func TestAddMembershipFresh(t *testing.T) {
	paths := Paths{ConfigDir: filepath.Join(t.TempDir(), "c")}
	m := testMembership(t, "mesh-1", "demo")
	before, err := paths.AddMembership(m)
	if err != nil || len(before) != 0 {
		t.Fatalf("AddMembership = %v, %v", before, err)
	}
	got, err := paths.LoadMemberships()
	if err != nil || len(got) != 1 || got[0] != m {
		t.Fatalf("LoadMemberships = %+v, %v; want [%+v]", got, err, m)
	}
	for path, want := range map[string]os.FileMode{paths.ConfigDir: 0o700 | os.ModeDir, paths.ConfigFile(): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v, %v; want %v", path, fi.Mode(), err, want)
		}
	}
}

func TestAddMembershipKeepsTheRest(t *testing.T) {
	paths := Paths{ConfigDir: t.TempDir()}
	orig := `{
  "meshes": [{"meshId":"local-id","memberId":"m0","slug":"local","name":"local","pubkey":"aa","secretKey":"bb","brokerUrl":"","joinedAt":"x","upstreamExtra":{"keep":[1,2]}}],
  "apiKey": "sk-<keep>&me",
  "big": 12345678901234567890,
  "nested": {"a": null}
}`
	if err := os.WriteFile(paths.ConfigFile(), []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	m := testMembership(t, "mesh-1", "demo")
	before, err := paths.AddMembership(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 1 || before[0].Slug != "local" || before[0].BrokerURL != "" {
		t.Errorf("before = %+v, want the local mesh", before)
	}
	b, err := os.ReadFile(paths.ConfigFile())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"apiKey": `"sk-<keep>&me"`, "big": `12345678901234567890`, "nested": `{"a":null}`} {
		if got := compact(t, doc[key]); got != want {
			t.Errorf("%s = %s, want %s", key, got, want)
		}
	}
	var meshes []map[string]any
	if err := json.Unmarshal(doc["meshes"], &meshes); err != nil || len(meshes) != 2 {
		t.Fatalf("meshes %s: %v", doc["meshes"], err)
	}
	if !reflect.DeepEqual(meshes[0]["upstreamExtra"], map[string]any{"keep": []any{1.0, 2.0}}) {
		t.Errorf("the local mesh lost its extra field: %v", meshes[0])
	}
	got, err := paths.LoadMemberships()
	if err != nil || len(got) != 2 || got[1] != m {
		t.Errorf("LoadMemberships = %+v, %v", got, err)
	}
}

func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestAddMembershipRefusesDuplicates(t *testing.T) {
	paths := Paths{ConfigDir: t.TempDir()}
	first := testMembership(t, "mesh-1", "demo")
	if _, err := paths.AddMembership(first); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(paths.ConfigFile())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []Membership{testMembership(t, "mesh-1", "other"), testMembership(t, "mesh-2", "demo")} {
		_, err := paths.AddMembership(m)
		var dup *AlreadyJoinedError
		if !errors.Is(err, ErrAlreadyJoined) || !errors.As(err, &dup) || dup.Existing != first {
			t.Errorf("AddMembership(%s/%s) = %v; want AlreadyJoinedError naming the first", m.MeshID, m.Slug, err)
		}
	}
	if now, _ := os.ReadFile(paths.ConfigFile()); string(now) != string(orig) {
		t.Errorf("a refused add changed config.json:\n%s", now)
	}
}

func TestAddMembershipBadConfig(t *testing.T) {
	for name, content := range map[string]string{
		"not JSON":         "{",
		"not an object":    "[]",
		"meshes not array": `{"meshes": {"slug": "x"}}`,
		"mesh not object":  `{"meshes": [1]}`,
	} {
		t.Run(name, func(t *testing.T) {
			paths := Paths{ConfigDir: t.TempDir()}
			if err := os.WriteFile(paths.ConfigFile(), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := paths.AddMembership(testMembership(t, "mesh-1", "demo")); err == nil {
				t.Error("AddMembership accepted a config.json it cannot understand")
			}
			if now, _ := os.ReadFile(paths.ConfigFile()); string(now) != content {
				t.Errorf("config.json changed to %s", now)
			}
		})
	}
	paths := Paths{ConfigDir: t.TempDir()}
	if err := os.WriteFile(paths.ConfigFile(), []byte(`{"meshes": null, "k": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := paths.AddMembership(testMembership(t, "mesh-1", "demo")); err != nil {
		t.Errorf("meshes null: %v", err)
	}
}

// TestLocalAgents: NewLocalAgent mints another member of the embedded
// broker's mesh, which AddMembership records beside it (the one meshId that
// may appear twice); names are checked, and a mesh of a remote broker still
// cannot be joined twice.
func TestLocalAgents(t *testing.T) {
	paths := Paths{ConfigDir: filepath.Join(t.TempDir(), "c")}
	if _, err := NewLocalAgent("bob", nil); err == nil {
		t.Fatal("an agent without a local mesh")
	}
	have, err := paths.EnsureMemberships()
	if err != nil || len(have) != 1 {
		t.Fatalf("EnsureMemberships: %v %v", have, err)
	}
	bob, err := NewLocalAgent("bob", have)
	if err != nil || bob.MeshID != have[0].MeshID || bob.MemberID == have[0].MemberID || bob.Pubkey == have[0].Pubkey || bob.BrokerURL != "" {
		t.Fatalf("NewLocalAgent = %+v, %v (local %+v)", bob, err, have[0])
	}
	if _, err := paths.AddMembership(bob); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "Bob", "-x", "a b", string(make([]byte, 65))} {
		if _, err := NewLocalAgent(bad, have); err == nil {
			t.Errorf("agent name %q accepted", bad)
		}
	}
	remote := testMembership(t, "mesh-r", "r1")
	again := testMembership(t, "mesh-r", "r2")
	if _, err := paths.AddMembership(remote); err != nil {
		t.Fatal(err)
	}
	if _, err := paths.AddMembership(again); !errors.Is(err, ErrAlreadyJoined) {
		t.Fatalf("a remote mesh joined twice: %v", err)
	}
	ms, err := paths.LoadMemberships()
	if err != nil || len(ms) != 3 {
		t.Fatalf("memberships: %+v %v", ms, err)
	}
}
