package mcpserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
)

func TestChooseMesh(t *testing.T) {
	t.Setenv(config.EnvMesh, "")
	served := func(slugs ...string) *messages.Version {
		v := &messages.Version{PID: 7}
		for _, s := range slugs {
			v.Meshes = append(v.Meshes, messages.MeshInfo{Mesh: s})
		}
		return v
	}
	for _, c := range []struct {
		asked string
		v     *messages.Version
		want  string
		err   string
	}{
		{"", served("demo"), "demo", ""},
		{"ops", served("demo", "ops"), "ops", ""},
		{"nope", served("demo"), "", `serves no mesh "nope" (it serves: demo)`},
		{"nope", served(), "", "(it serves: none)"},
		{"", served(), "", "join one with `claudemesh join"},
		{"", served("demo", "ops"), "", "name one with --mesh or CLAUDEMESH_MESH"},
		// Another agent's identity (daemon add-agent) is never the default.
		{"", &messages.Version{Meshes: []messages.MeshInfo{{Mesh: "local"}, {Mesh: "bob", Agent: true}}}, "local", ""},
		{"bob", &messages.Version{Meshes: []messages.MeshInfo{{Mesh: "local"}, {Mesh: "bob", Agent: true}}}, "bob", ""},
		{"", &messages.Version{Meshes: []messages.MeshInfo{{Mesh: "bob", Agent: true}}}, "bob", ""},
	} {
		got, err := ChooseMesh(c.asked, c.v)
		if got != c.want || (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("ChooseMesh(%q, %v) = %q, %v; want %q, %q", c.asked, c.v.Meshes, got, err, c.want, c.err)
		}
	}
	t.Setenv(config.EnvMesh, "ops")
	if got, err := ChooseMesh("", served("demo", "ops")); got != "ops" || err != nil {
		t.Errorf("with CLAUDEMESH_MESH=ops: %q, %v", got, err)
	}
}

func TestSessionToken(t *testing.T) {
	tok := strings.Repeat("ab", 32)
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(strings.ToUpper(tok)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file, token, want, err string
	}{
		{"", "", "", ""},
		{"", tok, tok, ""},
		{"", "xyz", "", "CLAUDEMESH_IPC_TOKEN is not a session token"},
		{file, "ignored", tok, ""},
		{filepath.Join(t.TempDir(), "missing"), "", "", "cannot be read"},
	} {
		t.Setenv(EnvTokenFile, c.file)
		t.Setenv(EnvToken, c.token)
		got, err := SessionToken()
		if got != c.want || (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("file %q token %q: %q, %v; want %q, %q", c.file, c.token, got, err, c.want, c.err)
		}
		if InsideSession() != (c.file != "" || c.token != "") {
			t.Errorf("file %q token %q: InsideSession %v", c.file, c.token, InsideSession())
		}
	}
}

// TestNewRegistration: a session of its own takes the enclosing session's
// id and name only when it inherits them (claudemesh mcp inside launch
// does; a launch inside a launch does not).
func TestNewRegistration(t *testing.T) {
	t.Setenv(config.EnvSessionID, "outer-id")
	t.Setenv(config.EnvDisplayName, "outer")
	in, err := NewRegistration("", "demo", "", true)
	if err != nil {
		t.Fatal(err)
	}
	if in.SessionID != "outer-id" || in.DisplayName != "outer" || !messages.ValidSessionToken(in.Token) || in.PID != os.Getpid() || in.Mesh != "demo" {
		t.Errorf("inheriting: %+v", in)
	}
	own, err := NewRegistration("", "demo", "", false)
	if err != nil {
		t.Fatal(err)
	}
	cwd, _ := os.Getwd()
	if own.SessionID == "outer-id" || own.DisplayName == "outer" || !strings.HasPrefix(own.DisplayName, messages.SessionNameBase(cwd)+"-") ||
		own.Token == in.Token {
		t.Errorf("not inheriting: %+v", own)
	}
	if named, _ := NewRegistration("tok", "demo", "alice", true); named.DisplayName != "alice" || named.Token != "tok" {
		t.Errorf("named: %+v", named)
	}
}
