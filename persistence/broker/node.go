package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Limits of what a hello says about its node: longer values are cut, not
// refused (a node is listed, not trusted).
const (
	MaxNodeHost    = 255
	MaxNodeVersion = 64
)

// NodeConn is a daemon's member connection to a mesh: the member, what its
// hello said, and the connection (the broker replica and its id there)
// that holds the node's row.
type NodeConn struct {
	MeshID   string
	MemberID string
	Host     string
	Version  string
	Replica  string
	ConnID   string
}

// Node is one daemon of a mesh as Nodes lists it.
type Node struct {
	Pubkey      string
	Name        string
	Host        string
	Version     string
	State       string // messages.NodeOnline, NodeStale or NodeOffline
	ConnectedAt time.Time
	LastSeenAt  time.Time
}

// ConnectNode records the node of a connection that passed its hello:
// connected and seen now, held by this connection (a reconnecting daemon's
// new connection takes the row over from its old one).
func (s *Store) ConnectNode(ctx context.Context, c NodeConn) error {
	now := s.d.time(s.clock())
	_, err := s.db.ExecContext(ctx, s.d.rewrite(`INSERT INTO node (mesh_id, member_id, host, version, replica, conn_id,
		connected_at, last_seen_at, disconnected_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)
		ON CONFLICT (mesh_id, member_id) DO UPDATE SET host = excluded.host, version = excluded.version,
		replica = excluded.replica, conn_id = excluded.conn_id, connected_at = excluded.connected_at,
		last_seen_at = excluded.last_seen_at, disconnected_at = NULL`),
		c.MeshID, c.MemberID, cut(c.Host, MaxNodeHost), cut(c.Version, MaxNodeVersion), c.Replica, c.ConnID, now, now)
	if err != nil {
		return fmt.Errorf("connect node: %w", err)
	}
	return nil
}

// SeeNode records a heartbeat of the connection: seen now. A connection
// that no longer holds the row changes nothing.
func (s *Store) SeeNode(ctx context.Context, c NodeConn) error {
	_, err := s.db.ExecContext(ctx, s.d.rewrite(`UPDATE node SET last_seen_at = ?
		WHERE mesh_id = ? AND member_id = ? AND replica = ? AND conn_id = ? AND disconnected_at IS NULL`),
		s.d.time(s.clock()), c.MeshID, c.MemberID, c.Replica, c.ConnID)
	if err != nil {
		return fmt.Errorf("see node: %w", err)
	}
	return nil
}

// DisconnectNode records that the connection closed: offline, last seen
// now. A connection that no longer holds the row changes nothing.
func (s *Store) DisconnectNode(ctx context.Context, c NodeConn) error {
	now := s.d.time(s.clock())
	_, err := s.db.ExecContext(ctx, s.d.rewrite(`UPDATE node SET last_seen_at = ?, disconnected_at = ?
		WHERE mesh_id = ? AND member_id = ? AND replica = ? AND conn_id = ? AND disconnected_at IS NULL`),
		now, now, c.MeshID, c.MemberID, c.Replica, c.ConnID)
	if err != nil {
		return fmt.Errorf("disconnect node: %w", err)
	}
	return nil
}

// Nodes lists the mesh's nodes of active members by name, each with its
// state now: offline when its connection closed, stale when it was not
// seen within staleAfter (its replica died, or the link hangs), else
// online.
func (s *Store) Nodes(ctx context.Context, meshID string, staleAfter time.Duration) ([]Node, error) {
	rows, err := s.rdb.QueryxContext(ctx, s.d.rewrite(`SELECT m.pubkey, m.display_name, n.host, n.version,
		n.connected_at, n.last_seen_at, n.disconnected_at IS NOT NULL
		FROM node n JOIN member m ON m.id = n.member_id
		WHERE n.mesh_id = ? AND m.revoked_at IS NULL ORDER BY m.display_name, m.pubkey`), meshID)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	now := s.clock()
	out := []Node{}
	for rows.Next() {
		var n Node
		var closed bool
		if err := rows.Scan(&n.Pubkey, &n.Name, &n.Host, &n.Version, (*dbTime)(&n.ConnectedAt), (*dbTime)(&n.LastSeenAt), &closed); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		switch {
		case closed:
			n.State = messages.NodeOffline
		case now.Sub(n.LastSeenAt) > staleAfter:
			n.State = messages.NodeStale
		default:
			n.State = messages.NodeOnline
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// cut is s cut to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
