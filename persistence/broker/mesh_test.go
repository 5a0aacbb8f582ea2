package broker

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"sync"
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

func TestInvites(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		if _, err := e.s.CreateInvite(ctx, "no-such-mesh", 1, time.Hour); !errors.Is(err, ErrMeshNotFound) {
			t.Errorf("invite to unknown mesh: %v", err)
		}
		twoUses, err := e.s.CreateInvite(ctx, m.Slug, 2, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if raw, err := base64.RawURLEncoding.DecodeString(twoUses.Token); err != nil || len(raw) != 32 {
			t.Fatalf("token %q is not 32 bytes base64url: %v", twoUses.Token, err)
		}
		expiring, err := e.s.CreateInvite(ctx, m.Slug, 5, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		revokedKey, keptKey := newPubkey(t), newPubkey(t)
		steps := []struct {
			name    string
			token   string
			pubkey  string
			advance time.Duration
			revoke  string
			want    error
		}{
			{"first use", twoUses.Token, keptKey, 0, "", nil},
			{"second use", twoUses.Token, revokedKey, 0, "", nil},
			{"member again: existing membership, no use", twoUses.Token, keptKey, 0, "", nil},
			{"used up", twoUses.Token, newPubkey(t), 0, "", ErrInviteUsedUp},
			{"unknown token", "bm90LWEtdG9rZW4", newPubkey(t), 0, "", ErrInviteUnknown},
			{"revoked member", expiring.Token, revokedKey, 0, revokedKey, ErrMemberRevoked},
			{"expired", expiring.Token, newPubkey(t), time.Minute, "", ErrInviteExpired},
		}
		joined := map[string]*Member{}
		for _, s := range steps {
			if s.revoke != "" {
				if err := e.s.RevokeMember(ctx, m.ID, s.revoke); err != nil {
					t.Fatal(err)
				}
			}
			e.clock.Advance(s.advance)
			mem, mesh, err := e.s.RedeemInvite(ctx, s.token, s.pubkey, "agent-"+s.pubkey[:8])
			if !errors.Is(err, s.want) {
				t.Fatalf("%s: %v, want %v", s.name, err, s.want)
			}
			if err != nil {
				continue
			}
			if mesh.ID != m.ID || mem.MeshID != m.ID || mem.Pubkey != s.pubkey || mem.Revoked() {
				t.Errorf("%s: member %+v mesh %+v", s.name, mem, mesh)
			}
			if prev := joined[s.pubkey]; prev != nil && prev.ID != mem.ID {
				t.Errorf("%s: second membership %s, want %s", s.name, mem.ID, prev.ID)
			}
			joined[s.pubkey] = mem
		}
		revoked, err := e.s.MemberByPubkey(ctx, m.ID, revokedKey)
		if err != nil || !revoked.Revoked() {
			t.Errorf("revoked member reads as %+v, %v", revoked, err)
		}
		if _, _, err := e.s.RedeemInvite(ctx, expiring.Token, "xyz", "agent"); !errors.Is(err, ErrInvalid) {
			t.Errorf("bad pubkey: %v", err)
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

// TestInviteConcurrentRedeem: an invite with n uses joins exactly n of many
// concurrent redeemers.
func TestInviteConcurrentRedeem(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		m := e.mesh(t, Mesh{})
		inv, err := e.s.CreateInvite(context.Background(), m.Slug, 3, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		errs := make([]error, 20)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				_, _, errs[i] = e.s.RedeemInvite(context.Background(), inv.Token, newPubkey(t), fmt.Sprint("agent-", i))
			})
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, ErrInviteUsedUp):
				t.Errorf("redeem: %v", err)
			}
		}
		if ok != 3 || e.count(t, "member") != 3 {
			t.Errorf("%d joined, %d member rows; want 3", ok, e.count(t, "member"))
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
