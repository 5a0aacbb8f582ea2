package broker

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestCreateMesh(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m, err := e.s.CreateMesh(ctx, Mesh{Slug: "team"})
		if err != nil {
			t.Fatal(err)
		}
		want := Mesh{ID: m.ID, Slug: "team", CreatedAt: e.clock.Now(), DedupeMode: DedupeRetentionScoped,
			DedupeRetentionDays: 365, MaxPayloadBytes: 65536}
		for _, got := range []func() (*Mesh, error){
			func() (*Mesh, error) { return e.s.MeshBySlug(ctx, "team") },
			func() (*Mesh, error) { return e.s.MeshByID(ctx, m.ID) },
		} {
			g, err := got()
			if err != nil || !g.CreatedAt.Equal(want.CreatedAt) {
				t.Fatalf("read back %+v, %v", g, err)
			}
			g.CreatedAt = want.CreatedAt
			if *g != want {
				t.Errorf("read back %+v, want %+v", *g, want)
			}
		}
		cases := []struct {
			name string
			mesh Mesh
			want error
		}{
			{"taken slug", Mesh{Slug: "team"}, ErrMeshExists},
			{"bad slug", Mesh{Slug: "Team Space"}, ErrInvalid},
			{"empty slug", Mesh{}, ErrInvalid},
			{"retention below floor", Mesh{Slug: "short", DedupeRetentionDays: 2}, ErrInvalid},
			{"unknown mode", Mesh{Slug: "mode", DedupeMode: "forever"}, ErrInvalid},
			{"tiny payload", Mesh{Slug: "tiny", MaxPayloadBytes: 10}, ErrInvalid},
		}
		for _, c := range cases {
			if _, err := e.s.CreateMesh(ctx, c.mesh); !errors.Is(err, c.want) {
				t.Errorf("%s: %v, want %v", c.name, err, c.want)
			}
		}
		for _, get := range []func() (*Mesh, error){
			func() (*Mesh, error) { return e.s.MeshBySlug(ctx, "nope") },
			func() (*Mesh, error) { return e.s.MeshByID(ctx, "nope") },
		} {
			if _, err := get(); !errors.Is(err, ErrMeshNotFound) {
				t.Errorf("unknown mesh: %v, want ErrMeshNotFound", err)
			}
		}
	})
}

func TestRevokeMember(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice := e.join(t, m, "alice")
		if err := e.s.RevokeMember(ctx, m.ID, alice.Pubkey); err != nil {
			t.Fatal(err)
		}
		got, err := e.s.MemberByPubkey(ctx, m.ID, alice.Pubkey)
		if err != nil || !got.Revoked() || !got.RevokedAt.Equal(e.clock.Now()) {
			t.Errorf("revoked member reads as %+v, %v", got, err)
		}
		if err := e.s.RevokeMember(ctx, m.ID, alice.Pubkey); err != nil {
			t.Errorf("revoking twice: %v", err)
		}
		if err := e.s.RevokeMember(ctx, m.ID, newPubkey(t)); !errors.Is(err, ErrMemberNotFound) {
			t.Errorf("revoking a stranger: %v", err)
		}
		if _, err := e.s.MemberByPubkey(ctx, m.ID, newPubkey(t)); !errors.Is(err, ErrMemberNotFound) {
			t.Errorf("unknown member: %v", err)
		}
		revokedAt := e.clock.Now()
		for _, c := range []struct {
			since time.Time
			want  int
		}{{revokedAt.Add(-time.Second), 1}, {revokedAt, 0}} {
			got, err := e.s.RevokedSince(ctx, c.since)
			if err != nil || len(got) != c.want || (c.want == 1 && got[0] != (Recipient{MeshID: m.ID, Pubkey: alice.Pubkey})) {
				t.Errorf("RevokedSince(%v) = %v, %v; want %d (alice)", c.since, got, err, c.want)
			}
		}
	})
}

func TestProfiles(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		str := func(s string) *string { return &s }
		no := false
		want := Profile{Status: StatusIdle, Visible: true, Capabilities: []string{}}
		steps := []struct {
			name   string
			update ProfileUpdate
			apply  func(p *Profile)
		}{
			{"nothing", ProfileUpdate{}, func(*Profile) {}},
			{"status", ProfileUpdate{Status: str(StatusWorking)}, func(p *Profile) { p.Status = StatusWorking }},
			{"summary", ProfileUpdate{Summary: str("fixing the build")}, func(p *Profile) { p.Summary = "fixing the build" }},
			{"visible", ProfileUpdate{Visible: &no}, func(p *Profile) { p.Visible = false }},
			{"profile", ProfileUpdate{Avatar: str("🦊"), Title: str("reviewer"), Bio: str("reads diffs"),
				Capabilities: []string{"dm", "review"}}, func(p *Profile) {
				p.Avatar, p.Title, p.Bio, p.Capabilities = "🦊", "reviewer", "reads diffs", []string{"dm", "review"}
			}},
			{"clear capabilities", ProfileUpdate{Capabilities: []string{}}, func(p *Profile) { p.Capabilities = []string{} }},
		}
		for _, s := range steps {
			got, err := e.s.SetProfile(ctx, m.ID, alice.Pubkey, s.update)
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			s.apply(&want)
			if !reflect.DeepEqual(got.Profile, want) {
				t.Errorf("%s: profile %+v, want %+v", s.name, got.Profile, want)
			}
		}
		if _, err := e.s.SetProfile(ctx, m.ID, alice.Pubkey, ProfileUpdate{Status: str("asleep")}); !errors.Is(err, ErrInvalid) {
			t.Errorf("bad status: %v", err)
		}
		if err := e.s.RevokeMember(ctx, m.ID, bob.Pubkey); err != nil {
			t.Fatal(err)
		}
		if _, err := e.s.SetProfile(ctx, m.ID, bob.Pubkey, ProfileUpdate{Summary: str("x")}); !errors.Is(err, ErrMemberNotFound) {
			t.Errorf("revoked member's profile: %v", err)
		}
		members, err := e.s.Members(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(members) != 1 || members[0].Pubkey != alice.Pubkey || !reflect.DeepEqual(members[0].Profile, want) {
			t.Errorf("Members = %+v, want alice alone with %+v", members, want)
		}
	})
}
