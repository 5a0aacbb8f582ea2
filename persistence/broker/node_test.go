package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker/brokertest"
)

// TestNodeStates: a connected node is online and its heartbeats move its
// last_seen_at; one not heard from for longer than the stale threshold
// (its replica died: no close was written) is stale; a closed one is
// offline, last seen when it closed; a reconnect takes the row over, and
// the old connection's heartbeat and close then change nothing. Revoked
// members' nodes and other meshes' are not listed.
func TestNodeStates(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		const stale = 90 * time.Second
		m, other := e.mesh(t, Mesh{}), e.mesh(t, Mesh{})
		alice, bob, carol := e.join(t, m, "alice"), e.join(t, m, "bob"), e.join(t, m, "carol")
		dave := e.join(t, other, "dave")
		conn := func(member *Member, meshID, replica, id string) NodeConn {
			return NodeConn{MeshID: meshID, MemberID: member.ID, Host: "box-" + member.DisplayName, Version: "1.2.3", Replica: replica, ConnID: id}
		}
		a, b := conn(alice, m.ID, "r1", "conn-1"), conn(bob, m.ID, "r2", "conn-1")
		start := e.clock.Now().Truncate(time.Millisecond)
		for _, c := range []NodeConn{a, b, conn(carol, m.ID, "r1", "conn-2"), conn(dave, other.ID, "r1", "conn-3")} {
			if err := e.s.ConnectNode(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.s.RevokeMember(ctx, m.ID, carol.Pubkey); err != nil {
			t.Fatal(err)
		}
		nodes := func() map[string]Node {
			t.Helper()
			list, err := e.s.Nodes(ctx, m.ID, stale)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]Node{}
			for _, n := range list {
				out[n.Name] = n
			}
			if len(out) != 2 || len(list) != 2 || list[0].Name != "alice" {
				t.Fatalf("nodes = %+v, want alice and bob, by name", list)
			}
			return out
		}
		got := nodes()
		if n := got["alice"]; n.State != messages.NodeOnline || n.Pubkey != alice.Pubkey || n.Host != "box-alice" || n.Version != "1.2.3" ||
			!n.ConnectedAt.Equal(start) || !n.LastSeenAt.Equal(start) {
			t.Errorf("alice just connected: %+v", n)
		}

		e.clock.Advance(stale / 2)
		if err := e.s.SeeNode(ctx, a); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(stale/2 + time.Millisecond) // bob last seen stale+1ms ago, alice stale/2+1ms ago
		got = nodes()
		if n := got["alice"]; n.State != messages.NodeOnline || !n.LastSeenAt.Equal(start.Add(stale/2)) || !n.ConnectedAt.Equal(start) {
			t.Errorf("alice after a heartbeat: %+v", n)
		}
		if n := got["bob"]; n.State != messages.NodeStale || !n.LastSeenAt.Equal(start) {
			t.Errorf("bob, unheard for longer than the threshold: %+v, want stale", n)
		}

		if err := e.s.DisconnectNode(ctx, a); err != nil {
			t.Fatal(err)
		}
		closedAt := e.clock.Now().Truncate(time.Millisecond)
		if n := nodes()["alice"]; n.State != messages.NodeOffline || !n.LastSeenAt.Equal(closedAt) {
			t.Errorf("alice closed: %+v", n)
		}
		e.clock.Advance(time.Second)
		if err := e.s.SeeNode(ctx, a); err != nil { // a heartbeat racing the close
			t.Fatal(err)
		}
		if n := nodes()["alice"]; n.State != messages.NodeOffline || !n.LastSeenAt.Equal(closedAt) {
			t.Errorf("a heartbeat after the close: %+v, want offline, unchanged", n)
		}

		// bob's daemon reconnects to another replica before its old link is
		// seen to drop: the old connection no longer speaks for the node.
		b2 := conn(bob, m.ID, "r1", "conn-9")
		b2.Host, b2.Version = strings.Repeat("h", MaxNodeHost+10), ""
		if err := e.s.ConnectNode(ctx, b2); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Second)
		for _, step := range []func(context.Context, NodeConn) error{e.s.SeeNode, e.s.DisconnectNode} {
			if err := step(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		if n := nodes()["bob"]; n.State != messages.NodeOnline || len(n.Host) != MaxNodeHost || n.Version != "" ||
			!n.ConnectedAt.Equal(e.clock.Now().Add(-time.Second).Truncate(time.Millisecond)) {
			t.Errorf("bob reconnected, his old connection closed after: %+v, want online with the new hello's host and version", n)
		}
	})
}

// BenchmarkSeeNode is one daemon's heartbeat write (one per ping interval,
// 30 s): the UPDATE of its node row among 1,000 nodes of the mesh.
//
//	CLAUDEMESH_TEST_POSTGRES_URL=postgres://… go test -run='^$' -bench=BenchmarkSeeNode -benchtime=5000x ./persistence/broker/
func BenchmarkSeeNode(b *testing.B) {
	for _, backend := range []string{sqliteName, postgresName} {
		b.Run(backend, func(b *testing.B) {
			opts := Options{Dir: b.TempDir()}
			if backend == postgresName {
				opts = Options{DatabaseURL: brokertest.PostgresURL(b)}
			}
			e := openEnv(b, opts)
			ctx := context.Background()
			m := e.mesh(b, Mesh{})
			var conns []NodeConn
			for i := range 1000 {
				e.clock.Advance(time.Second) // invites alike are limited per second
				member := e.join(b, m, fmt.Sprintf("node-%d", i))
				c := NodeConn{MeshID: m.ID, MemberID: member.ID, Host: "box", Version: "1", Replica: "r1", ConnID: fmt.Sprintf("conn-%d", i)}
				if err := e.s.ConnectNode(ctx, c); err != nil {
					b.Fatal(err)
				}
				conns = append(conns, c)
			}
			b.ResetTimer()
			for i := range b.N {
				if err := e.s.SeeNode(ctx, conns[i%len(conns)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
