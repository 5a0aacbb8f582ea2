package broker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestSessionRows: a session recorded by the replica holding its
// connection is a DM recipient for every replica (an accept that the hub
// did not map it for) while its row counts — its heartbeats keep it a
// stale threshold ahead, its close a grace ahead — and never for another
// mesh, nor once its member is revoked; it is listed while connected; a
// reconnect takes the row over, and the old connection's heartbeat and
// close then change nothing; the sweep deletes rows that stopped counting.
func TestSessionRows(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		const stale, grace = 90 * time.Second, 30 * time.Second
		m, other := e.mesh(t, Mesh{}), e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		outsider := e.join(t, other, "outsider")
		s1 := SessionConn{MeshID: m.ID, SessionPubkey: newPubkey(t), MemberPubkey: bob.Pubkey, Replica: "r2", ConnID: "conn-1",
			DisplayName: "bob (build)", SessionID: "launch-1", Hostname: strings.Repeat("h", MaxSessionText+5), Cwd: "/src",
			Groups: []messages.Group{{Name: "reviewers", Role: "lead"}}}
		if err := e.s.ConnectSession(ctx, s1, stale); err != nil {
			t.Fatal(err)
		}
		n := 0
		dmTo := func(mesh *Mesh, from *Member, key string) AcceptResult {
			n++
			return e.accept(t, dm(mesh, from, &Member{Pubkey: key}, fmt.Sprint("dm-", n), "x"))[0]
		}
		accepted := func(what string, res AcceptResult, want bool) {
			t.Helper()
			var me *messages.Error
			switch {
			case want && res.Outcome != Created:
				t.Errorf("%s: outcome %d (%v), want created", what, res.Outcome, res.Err)
			case !want && (res.Outcome != Rejected || !errors.As(res.Err, &me) || me.Code != CodeUnknownRecipient ||
				res.Status() != http.StatusNotFound):
				t.Errorf("%s: outcome %d (%v), want 404 %s", what, res.Outcome, res.Err, CodeUnknownRecipient)
			}
		}
		accepted("a session connected to another replica", dmTo(m, alice, s1.SessionPubkey), true)
		if n := e.count(t, "delivery_queue WHERE recipient_pubkey = ? AND lease_expires_at IS NULL", s1.SessionPubkey); n != 1 {
			t.Errorf("%d unleased delivery rows for the session key, want 1", n)
		}
		accepted("the session key in another mesh", dmTo(other, outsider, s1.SessionPubkey), false)

		list, err := e.s.Sessions(ctx, m.ID)
		if err != nil || len(list) != 1 {
			t.Fatalf("sessions = %+v, %v; want bob's", list, err)
		}
		if got := list[0]; got.SessionPubkey != s1.SessionPubkey || got.MemberPubkey != bob.Pubkey || got.Replica != "r2" ||
			got.DisplayName != "bob (build)" || len(got.Hostname) != MaxSessionText || got.Cwd != "/src" ||
			len(got.Groups) != 1 || got.Groups[0] != s1.Groups[0] || !got.ConnectedAt.Equal(e.clock.Now().Truncate(time.Millisecond)) {
			t.Errorf("listed %+v", got)
		}

		// Heartbeats keep it counting; unheard for the stale threshold (its
		// replica died) it stops.
		e.clock.Advance(stale - time.Second)
		if hold, err := e.s.SeeSession(ctx, s1, stale); err != nil || hold != SessionHeld {
			t.Fatalf("a heartbeat of the connection holding the row: %v, %v", hold, err)
		}
		e.clock.Advance(stale - time.Second)
		accepted("after a heartbeat", dmTo(m, alice, s1.SessionPubkey), true)
		e.clock.Advance(time.Second)
		accepted("unheard for the stale threshold", dmTo(m, alice, s1.SessionPubkey), false)
		if list, _ := e.s.Sessions(ctx, m.ID); len(list) != 0 {
			t.Errorf("a stale session is listed: %+v", list)
		}

		// It reconnects to another replica before its old connection is
		// seen to close: the old one's heartbeat and close change nothing.
		s2 := s1
		s2.Replica, s2.ConnID, s2.Hostname = "r1", "conn-7", "box"
		if err := e.s.ConnectSession(ctx, s2, stale); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Second)
		if err := e.s.DisconnectSession(ctx, s1, grace); err != nil {
			t.Fatal(err)
		}
		if hold, err := e.s.SeeSession(ctx, s1, stale); err != nil || hold != SessionTakenOver {
			t.Fatalf("a heartbeat of the old connection: %v, %v; want it told the row was taken over", hold, err)
		}
		if list, _ := e.s.Sessions(ctx, m.ID); len(list) != 1 || list[0].Replica != "r1" || list[0].Hostname != "box" {
			t.Errorf("after the old connection's close: %+v, want the new connection's", list)
		}

		// Its close: no longer listed, counting for the grace.
		if err := e.s.DisconnectSession(ctx, s2, grace); err != nil {
			t.Fatal(err)
		}
		if list, _ := e.s.Sessions(ctx, m.ID); len(list) != 0 {
			t.Errorf("a closed session is listed: %+v", list)
		}
		e.clock.Advance(grace - time.Millisecond)
		accepted("within the grace after its close", dmTo(m, alice, s1.SessionPubkey), true)
		if hold, err := e.s.SeeSession(ctx, s2, stale); err != nil || hold != SessionLost { // a heartbeat racing the close
			t.Fatalf("a heartbeat after the connection's close: %v, %v; want the row lost", hold, err)
		}
		e.clock.Advance(time.Millisecond)
		accepted("after the grace", dmTo(m, alice, s1.SessionPubkey), false)

		// A session of a member revoked counts for nothing.
		s3 := SessionConn{MeshID: m.ID, SessionPubkey: newPubkey(t), MemberPubkey: alice.Pubkey, Replica: "r2", ConnID: "conn-2"}
		if err := e.s.ConnectSession(ctx, s3, stale); err != nil {
			t.Fatal(err)
		}
		if list, _ := e.s.Sessions(ctx, m.ID); len(list) != 1 || list[0].Groups == nil {
			t.Errorf("alice's session: %+v, want it listed with no groups", list)
		}
		if err := e.s.RevokeMember(ctx, m.ID, alice.Pubkey); err != nil {
			t.Fatal(err)
		}
		accepted("a session of a revoked member", dmTo(m, bob, s3.SessionPubkey), false)
		if list, _ := e.s.Sessions(ctx, m.ID); len(list) != 0 {
			t.Errorf("a revoked member's session is listed: %+v", list)
		}

		if n, err := e.s.SweepSessions(ctx, e.clock.Now()); err != nil || n != 1 {
			t.Errorf("sweep = %d, %v; want bob's session's row", n, err)
		}
		if n := e.count(t, "mesh_session"); n != 1 {
			t.Errorf("%d rows after the sweep, want alice's session's", n)
		}
	})
}

// TestAcceptDMToUnknownKey: in one batch, DMs to a member, to a session
// another replica recorded and to a key no one holds: the last alone is
// refused, and leaves no dedupe, message or delivery row; the batch ran
// set-wise.
func TestAcceptDMToUnknownKey(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		alice, bob := e.join(t, m, "alice"), e.join(t, m, "bob")
		session := SessionConn{MeshID: m.ID, SessionPubkey: newPubkey(t), MemberPubkey: bob.Pubkey, Replica: "r2", ConnID: "conn-1"}
		if err := e.s.ConnectSession(ctx, session, time.Minute); err != nil {
			t.Fatal(err)
		}
		madeUp := newPubkey(t)
		res := e.accept(t, dm(m, alice, bob, "to-member", "x"), dm(m, alice, &Member{Pubkey: session.SessionPubkey}, "to-session", "x"),
			dm(m, alice, &Member{Pubkey: madeUp}, "to-no-one", "x"))
		if res[0].Outcome != Created || res[1].Outcome != Created {
			t.Errorf("to the member: %d (%v); to the session: %d (%v); want both created", res[0].Outcome, res[0].Err, res[1].Outcome, res[1].Err)
		}
		var me *messages.Error
		if res[2].Outcome != Rejected || !errors.As(res[2].Err, &me) || me.Code != CodeUnknownRecipient {
			t.Errorf("to a made-up key: %d (%v), want 404 %s", res[2].Outcome, res[2].Err, CodeUnknownRecipient)
		}
		if row, err := e.s.LookupDedupe(ctx, m.ID, alice.Pubkey, "to-no-one"); row != nil || err != nil {
			t.Errorf("the refused DM left a dedupe row %+v (%v)", row, err)
		}
		for what, n := range map[string]int{
			"messages":                          e.count(t, "message WHERE client_message_id = ?", "to-no-one"),
			"delivery rows for the made-up key": e.count(t, "delivery_queue WHERE recipient_pubkey = ?", madeUp),
		} {
			if n != 0 {
				t.Errorf("%d %s, want none", n, what)
			}
		}
		if n := e.retriedPerRequest(); n != 0 {
			t.Errorf("%d batches fell back to per-request savepoints", n)
		}
	})
}
