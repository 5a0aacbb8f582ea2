package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelloName: the hello carries the member's own name, never the mesh's.
func TestHelloName(t *testing.T) {
	host, _ := os.Hostname()
	remote := Membership{Slug: "team", Name: "team", BrokerURL: "ws://b/ws"}
	cases := []struct {
		name    string
		m       Membership
		profile string
		want    string
	}{
		{"join --name wins", Membership{Slug: "team", Name: "team", BrokerURL: "ws://b/ws", DisplayName: "alice"}, "al", "alice"},
		{"the profile next", remote, "al", "al"},
		{"an embedded agent's own name", Membership{Slug: "bot", Name: "bot"}, "", "bot"},
		{"else the hostname, not the mesh's name", remote, "", strings.TrimSpace(host)},
	}
	for _, c := range cases {
		if got := c.m.HelloName(c.profile); got != c.want {
			t.Errorf("%s: HelloName = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestProfileDisplayName(t *testing.T) {
	cases := []struct {
		file, want string
		wantErr    bool
	}{
		{"", "", false}, // no file
		{`{"meshes":[]}`, "", false},
		{`{"displayName":null}`, "", false},
		{`{"displayName":" Alice "}`, "Alice", false},
		{`{"displayName":42}`, "", true},
	}
	for _, c := range cases {
		paths := Paths{ConfigDir: t.TempDir()}
		if c.file != "" {
			if err := os.WriteFile(filepath.Join(paths.ConfigDir, "config.json"), []byte(c.file), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		got, err := paths.ProfileDisplayName()
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("%s: ProfileDisplayName = %q, %v; want %q (error %v)", c.file, got, err, c.want, c.wantErr)
		}
	}
}
