package broker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

const testBrokerWS = "ws://127.0.0.1:7900/ws"

// invite issues a member invite to the mesh valid for an hour.
func (e *env) invite(t testing.TB, slug string, uses int) *Invite {
	t.Helper()
	inv, err := e.s.CreateInvite(context.Background(), InviteRequest{MeshSlug: slug, BrokerURL: testBrokerWS, Uses: uses, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// TestCreateInvite: a signed v1 token that decodes and verifies, one owner
// key per mesh, and every bad request refused with nothing stored.
func TestCreateInvite(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		inv, err := e.s.CreateInvite(ctx, InviteRequest{MeshSlug: m.Slug, BrokerURL: "wss://mesh.example/ws",
			Role: messages.InviteRoleAdmin, Uses: 3, TTL: 90 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		p, err := messages.DecodeInviteToken(inv.Token)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Verify(e.clock.Now()); err != nil {
			t.Fatal(err)
		}
		want := messages.InvitePayload{V: 1, MeshID: m.ID, MeshSlug: m.Slug, BrokerURL: "wss://mesh.example/ws",
			ExpiresAt: e.clock.Now().Add(90 * time.Minute).Unix(), MeshRootKey: p.MeshRootKey, Role: "admin",
			OwnerPubkey: p.OwnerPubkey, Signature: p.Signature}
		if *p != want || *inv.Payload != want {
			t.Errorf("payload %+v\nwant %+v", *p, want)
		}
		if root, err := base64.RawURLEncoding.DecodeString(p.MeshRootKey); err != nil || len(root) != 32 {
			t.Errorf("mesh_root_key %q: %v", p.MeshRootKey, err)
		}
		again := e.invite(t, m.Slug, 1)
		if again.Payload.OwnerPubkey != p.OwnerPubkey || again.Payload.MeshRootKey != p.MeshRootKey {
			t.Errorf("second invite signed by %s root %s; want the mesh's one key", again.Payload.OwnerPubkey, again.Payload.MeshRootKey)
		}
		if other := e.invite(t, e.mesh(t, Mesh{}).Slug, 1); other.Payload.OwnerPubkey == p.OwnerPubkey {
			t.Error("two meshes share an owner key")
		}
		list, err := e.s.Invites(ctx, m.Slug)
		if err != nil || len(list) != 2 || list[0].ID != inv.ID || list[0].Role != "admin" || list[0].MaxUses != 3 ||
			list[0].UsesLeft != 3 || !list[0].ExpiresAt.Equal(time.Unix(want.ExpiresAt, 0)) || list[0].RevokedAt != nil {
			t.Errorf("Invites = %+v, %v", list, err)
		}

		for _, c := range []struct {
			name string
			req  InviteRequest
			want error
		}{
			{"unknown mesh", InviteRequest{MeshSlug: "no-such-mesh", BrokerURL: testBrokerWS, Uses: 1, TTL: time.Hour}, ErrMeshNotFound},
			{"no uses", InviteRequest{MeshSlug: m.Slug, BrokerURL: testBrokerWS, TTL: time.Hour}, ErrInvalid},
			{"no lifetime", InviteRequest{MeshSlug: m.Slug, BrokerURL: testBrokerWS, Uses: 1}, ErrInvalid},
			{"owner role", InviteRequest{MeshSlug: m.Slug, BrokerURL: testBrokerWS, Role: "owner", Uses: 1, TTL: time.Hour}, ErrInvalid},
			{"http broker URL", InviteRequest{MeshSlug: m.Slug, BrokerURL: "http://h/ws", Uses: 1, TTL: time.Hour}, ErrInvalid},
			{"no host", InviteRequest{MeshSlug: m.Slug, BrokerURL: "ws:///ws", Uses: 1, TTL: time.Hour}, ErrInvalid},
		} {
			if _, err := e.s.CreateInvite(ctx, c.req); !errors.Is(err, c.want) {
				t.Errorf("%s: %v, want %v", c.name, err, c.want)
			}
		}
		if n := e.count(t, "invite"); n != 3 {
			t.Errorf("%d invite rows; want 3 (the refused requests store nothing)", n)
		}
	})
}

// TestRedeemInvite walks one invite and its neighbours through every
// outcome; a refusal consumes nothing.
func TestRedeemInvite(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		twoUses := e.invite(t, m.Slug, 2)
		expiring, err := e.s.CreateInvite(ctx, InviteRequest{MeshSlug: m.Slug, BrokerURL: testBrokerWS, Uses: 5, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		revoked := e.invite(t, m.Slug, 5)
		if err := e.s.RevokeInvite(ctx, m.Slug, strings.ToLower(revoked.ID)); err != nil {
			t.Fatal(err)
		}
		if err := e.s.RevokeInvite(ctx, m.Slug, revoked.ID); err != nil {
			t.Errorf("revoking twice: %v", err)
		}
		if err := e.s.RevokeInvite(ctx, m.Slug, "01J000000000000000000000000"); !errors.Is(err, ErrInviteUnknown) {
			t.Errorf("revoking an unknown invite: %v", err)
		}
		// Issued by another store with the same mesh id: signed, but not here.
		stranger := openEnv(t, Options{Dir: t.TempDir()})
		if _, err := stranger.s.CreateMesh(ctx, Mesh{ID: m.ID, Slug: m.Slug}); err != nil {
			t.Fatal(err)
		}
		foreign := stranger.invite(t, m.Slug, 1)
		tampered := tamper(t, twoUses.Token, func(p *messages.InvitePayload) { p.Role = messages.InviteRoleAdmin })

		revokedKey, keptKey := newPubkey(t), newPubkey(t)
		steps := []struct {
			name      string
			token     string
			pubkey    string
			advance   time.Duration
			revoke    string
			want      error
			already   bool
			usesAfter int // of twoUses
		}{
			{name: "first use", token: twoUses.Token, pubkey: keptKey, usesAfter: 1},
			{name: "second use", token: twoUses.Token, pubkey: revokedKey, usesAfter: 0},
			{name: "member again: existing membership, no use", token: twoUses.Token, pubkey: keptKey, already: true},
			{name: "used up", token: twoUses.Token, pubkey: newPubkey(t), want: ErrInviteUsedUp},
			{name: "tampered", token: tampered, pubkey: newPubkey(t), want: messages.ErrInviteSignature},
			{name: "not a v1 token", token: "bm90LWEtdG9rZW4", pubkey: newPubkey(t), want: messages.ErrInviteMalformed},
			{name: "issued elsewhere", token: foreign.Token, pubkey: newPubkey(t), want: ErrInviteUnknown},
			{name: "revoked invite", token: revoked.Token, pubkey: newPubkey(t), want: ErrInviteRevoked},
			{name: "revoked member", token: expiring.Token, pubkey: revokedKey, revoke: revokedKey, want: ErrMemberRevoked},
			{name: "expired", token: expiring.Token, pubkey: newPubkey(t), advance: time.Minute, want: ErrInviteExpired},
		}
		joined := map[string]*Member{}
		for _, s := range steps {
			if s.revoke != "" {
				if err := e.s.RevokeMember(ctx, m.ID, s.revoke); err != nil {
					t.Fatal(err)
				}
			}
			e.clock.Advance(s.advance)
			r, err := e.s.RedeemInvite(ctx, s.token, s.pubkey, "agent-"+s.pubkey[:8])
			if !errors.Is(err, s.want) {
				t.Fatalf("%s: %v, want %v", s.name, err, s.want)
			}
			if got := e.usesLeft(t, twoUses.ID); s.want == nil && got != s.usesAfter {
				t.Errorf("%s: twoUses has %d uses left, want %d", s.name, got, s.usesAfter)
			}
			if err != nil {
				continue
			}
			mem := r.Member
			if r.Mesh.ID != m.ID || mem.MeshID != m.ID || mem.Pubkey != s.pubkey || mem.Revoked() || r.AlreadyMember != s.already {
				t.Errorf("%s: %+v member %+v", s.name, r, mem)
			}
			if prev := joined[s.pubkey]; prev != nil && prev.ID != mem.ID {
				t.Errorf("%s: second membership %s, want %s", s.name, mem.ID, prev.ID)
			}
			joined[s.pubkey] = mem
		}
		if n := e.count(t, "member"); n != 2 {
			t.Errorf("%d member rows; want 2", n)
		}
		if _, err := e.s.RedeemInvite(ctx, revoked.Token, "xyz", "agent"); !errors.Is(err, ErrInvalid) {
			t.Errorf("bad pubkey: %v", err)
		}
	})
}

// TestRedeemInviteRole: the member keeps the role its invite granted.
func TestRedeemInviteRole(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		inv, err := e.s.CreateInvite(ctx, InviteRequest{MeshSlug: m.Slug, BrokerURL: testBrokerWS, Role: "admin", Uses: 1, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		r, err := e.s.RedeemInvite(ctx, inv.Token, newPubkey(t), "root")
		if err != nil {
			t.Fatal(err)
		}
		if n := e.count(t, "member WHERE id = ? AND role = 'admin'", r.Member.ID); n != 1 {
			t.Errorf("admin invite joined a member without the admin role")
		}
	})
}

// TestInviteConcurrentRedeem: an invite with n uses joins exactly n of many
// concurrent redeemers.
func TestInviteConcurrentRedeem(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		m := e.mesh(t, Mesh{})
		inv := e.invite(t, m.Slug, 3)
		errs := make([]error, 20)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				_, errs[i] = e.s.RedeemInvite(context.Background(), inv.Token, newPubkey(t), fmt.Sprint("agent-", i))
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
		if ok != 3 || e.count(t, "member") != 3 || e.usesLeft(t, inv.ID) != 0 {
			t.Errorf("%d joined, %d member rows, %d uses left; want 3, 3, 0", ok, e.count(t, "member"), e.usesLeft(t, inv.ID))
		}
	})
}

func (e *env) usesLeft(t testing.TB, id string) int {
	t.Helper()
	var n int
	if err := e.s.db.Get(&n, e.s.d.rewrite("SELECT uses_left FROM invite WHERE id = ?"), id); err != nil {
		t.Fatal(err)
	}
	return n
}

// tamper re-encodes token's payload after change, keeping its signature.
func tamper(t testing.TB, token string, change func(*messages.InvitePayload)) string {
	t.Helper()
	p, err := messages.DecodeInviteToken(token)
	if err != nil {
		t.Fatal(err)
	}
	change(p)
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(raw)
}
